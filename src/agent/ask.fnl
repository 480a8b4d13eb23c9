;; Asking the user: `agent.ask-user` puts a question with a form (a JSON Schema object, as ACP's
;; elicitation `requestedSchema`) to whoever runs the session, from a tool, a command or advice;
;; `ask-user` is the same function by a short name; and the `ask_user` tool lets the model ask
;; a question with choices. Each front end answers its own way: `oml acp` with the editor's
;; elicitation (when it offers one), the chat on the terminal, print mode not at all. Loaded
;; after agent.fnl.

(local agent _G.agent)
(local tools _G.tools)
(local fennel (require :fennel))

(fn agent.ask-user [request]
  "Ask the user REQUEST.message with the form REQUEST.schema (a JSON Schema object: {:type :object
:properties {...} :required [...]}, sent as ACP's requestedSchema), or, with REQUEST.url, send
them to that page (ACP's URL mode: a sign-in, a payment, a consent). Returns the answer as ACP
elicitation gives it: {:action :accept :content {field value ...}} ({:action :accept} for a
URL: the user went there, not that they finished), {:action :decline} or {:action :cancel}; or
nil and the reason when nobody can be asked here. The front ends advise it: `oml acp` asks the
editor (elicitation/create) when it offers that mode, the chat asks on the terminal; print mode
has nobody to ask."
  (values nil "there is nobody to ask here"))

(fn agent.can-ask-user? []
  "Whether a person can be asked here, so that the `ask_user` tool is offered to the model: false
by default; `oml acp` says yes when the editor offers form elicitation, the chat when it runs on
a terminal."
  false)

(global ask-user
        (fn [request]
          "(ask-user {:message ... :schema ...}): `agent.ask-user`, looked up by name."
          (agent.ask-user request)))

(fn choice-schema [question choices]
  ;; One required field, `answer`: one of CHOICES when there are some, else free text.
  (let [answer {:type :string :title question}]
    (when (and (= :table (type choices)) (< 0 (length choices)))
      (set answer.enum choices))
    {:type :object :properties {: answer} :required [:answer]}))

(fn tools.ask_user [{: question : choices}]
  {:fnl/docstring "Ask the user a question and wait for the answer: give the question and, when the answer is one of a few options, the choices. Use it when you cannot go on without the user's decision; do not ask what you can find out yourself."
   :kind :think :title "Ask the user"
   :params {:question [:string "The question, in one or two sentences"]
            :choices [:array "The answers to choose from (leave out for a free answer)"
                      {:items {:type :string}} :optional]}}
  (if (or (not= :string (type question)) (not (question:find "%S")))
      {:content "ask_user needs a question" :error? true}
      (let [(answer why) (agent.ask-user {:message question
                                          :schema (choice-schema question choices)})]
        (case answer
          {:action :accept :content {:answer a}} (.. "The user answered: " (tostring a))
          {:action :accept} "The user accepted without an answer."
          {:action :decline} "The user declined to answer."
          {:action :cancel} "The user dismissed the question."
          _ (.. "The user could not be asked (" (or why "no way to ask") "): decide yourself, or say what you need and stop.")))))

(fennel.metadata:set tools.ask_user :available? #(agent.can-ask-user?))
