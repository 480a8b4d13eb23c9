;; Compaction: when the transcript grows past `agent.compact-at` of `llm.context-window`, or the
;; provider refuses a request as longer than its context, the older turns are summarised by the
;; model and replaced by the summary. The session file keeps the whole history (compaction
;; appends entries, never rewrites). Loaded after agent.fnl.

(local oml _G.oml)
(local agent _G.agent)
(local session _G.session)
(local json _G.json)

;;; Compaction

;; What an image counts for in an estimate, in tokens: its base64 would count hundreds of
;; thousands, while models bill a picture at about a thousand.
(local image-tokens 1000)

;; Lengths are counted with json.encoded-length: a message can hold a whole file, and its text
;; would be one more copy of it for every estimate.
(fn message-tokens [m]
  (if (= :table (type m.content))
      (accumulate [n (math.ceil (/ (json.encoded-length (doto (collect [k v (pairs m)] k v)
                                                          (tset :content ""))) 4))
                   _ part (ipairs m.content)]
        (+ n (if (= part.type :image_url) image-tokens
                 (math.ceil (/ (json.encoded-length part) 4)))))
      (math.ceil (/ (json.encoded-length m) 4))))

(fn agent.estimate-tokens [messages]
  "A rough token count of MESSAGES: their JSON length over four, an image part counting as a
thousand tokens."
  (accumulate [n 0 _ m (ipairs messages)]
    (+ n (message-tokens m))))

(fn message-text [content]
  "The text of a message's CONTENT: a string, or its text parts joined ([image] for an image)."
  (if (= :string (type content)) content
      (= :table (type content))
      (table.concat (icollect [_ p (ipairs content)]
                      (if (= p.type :text) (tostring p.text) (= p.type :image_url) "[image]")) " ")
      ""))

(fn agent.compact-cut [messages keep-tokens]
  "The index of the first message compaction keeps verbatim: the latest user message such that
what follows it fits KEEP-TOKENS, else the last user message; 1 (keep everything) when there is
no earlier user message to cut at. Cutting only before a user message never separates a tool call
from its result."
  (var cut nil)
  (var size 0)
  (var i (length messages))
  (while (> i 1)
    (set size (+ size (agent.estimate-tokens [(. messages i)])))
    (when (= :user (. messages i :role))
      (when (or (= nil cut) (<= size keep-tokens))
        (set cut i)))
    (set i (- i 1)))
  (or cut 1))

(fn agent.compact-prompt [messages ?instructions]
  "The request that asks the model to summarise MESSAGES (the older part of the transcript)."
  (let [lines []]
    (each [_ m (ipairs messages)]
      (let [text (message-text m.content)]
        (table.insert lines (.. "[" (tostring m.role) "] " text))
        (each [_ c (ipairs (or m.tool_calls []))]
          (table.insert lines (.. "[tool call] " (tostring c.function.name) " "
                                  (tostring c.function.arguments))))))
    (.. "Summarise this conversation between a user and a coding agent so that the agent can go on "
        "without it: the user's goals, decisions, files touched and their state, and what is left "
        "to do. Be concise." (if ?instructions (.. "\n\nAlso: " ?instructions) "")
        "\n\n" (table.concat lines "\n"))))

(fn agent.compact! [?instructions ?keep-tokens ?trigger]
  "Summarise the older turns of the transcript through `agent.complete` and replace them with the
summary (as a user message), keeping the most recent part verbatim: ?KEEP-TOKENS (default
`agent.compact-keep` of `llm.context-window`; 0 keeps only the last turn), see
`agent.compact-cut`. ?INSTRUCTIONS go to the summariser. PreCompact hooks run first
(`agent.pre-compact-hooks`, ?TRIGGER :auto or, by default, :manual). The file keeps the whole history.
Returns the number of messages replaced (0 when there is nothing to compact)."
  (let [t (session.transcript)
        window (oml.setting "llm.context-window")
        keep (or ?keep-tokens (* window (oml.setting "agent.compact-keep")))
        cut (agent.compact-cut t keep)]
    (if (<= cut 1)
        0
        (let [_ (agent.pre-compact-hooks (or ?trigger :manual) ?instructions)
              old (fcollect [i 1 (- cut 1)] (. t i))
              summary (agent.complete (agent.compact-prompt old ?instructions))
              new [{:role :user
                    :content (.. "Summary of the earlier conversation:\n\n" summary)}]]
          (for [i cut (length t)] (table.insert new (. t i)))
          (session.record! :compaction {:replaced (- cut 1) : summary})
          (session.set-transcript! new)
          (- cut 1)))))

(fn agent.context-exceeded? [err]
  "Whether ERR, the error of a model call, is the provider's refusal of a request longer than the
model's context: its :context-exceeded? field, which `llm.chat` sets where it reads the
provider's answer (an HTTP 400 or 413 saying so, or an error inside the stream saying so)."
  (and (= :table (type err)) (= true (. err :context-exceeded?))))

(fn compaction-notice [why]
  "Tell the frontend, as reasoning, that the loop compacts now and WHY: a summary call takes a
while, and the user would otherwise see a silent pause."
  (session.emit! {:type :thought-delta :text (.. "Compacting the conversation: " why ".\n")}))

(fn agent.call-model-or-compact []
  "Call the model with the transcript; when the provider answers that the context is exceeded,
compact once (`agent.compact!`, keeping only the last turn) and retry once. Any other error, or a
second refusal, is raised as it came."
  (let [(ok response) (pcall agent.call-model (agent.build-request (session.transcript)))]
    (if ok
        response
        (and (agent.context-exceeded? response)
             (do (compaction-notice "the model refused it as longer than its context")
                 (< 0 (agent.compact! nil 0 :auto))))
        (agent.call-model (agent.build-request (session.transcript)))
        (error response 0))))

(fn agent.maybe-compact! []
  "Compact when the transcript's estimate passes `agent.compact-at` of `llm.context-window`."
  (let [at (oml.setting "agent.compact-at")
        window (oml.setting "llm.context-window")]
    (when (and (< 0 at)
               (> (agent.estimate-tokens (session.transcript)) (* at window)))
      (compaction-notice "it passed agent.compact-at of llm.context-window")
      (agent.compact! nil nil :auto))))
