;; Delegation: the `delegate` tool and `agent.delegate`, which run one turn of another ACP agent
;; (Claude, Codex, Gemini, another oml) through oml's own client and hand its answer back.
;; Loaded after permission.fnl.
;;
;; One sub-agent connection and session per (oml session, delegate name), opened on first use
;; and reused, so a follow-up keeps its context; `agent.close-delegates` ends them when the oml
;; session ends (src/agent/delegate.rs calls it by name). A delegate is an agent's name
;; (`client.agents`, or a catalog agent such as "oml") or a profile of `agent.defdelegate`: an
;; agent plus a model, a mode and instructions. The sub-agent's permission requests go through
;; `agent.delegate-permission`, which asks oml's own front end (`agent.ask-permission`) with the
;; sub-agent named; its progress is shown in the tool card through `oml.tool-progress`.

(local oml _G.oml)
(local agent _G.agent)
(local tools _G.tools)
(local session _G.session)
(local fennel (require :fennel))

(defsetting agent.delegate-agents nil :table?
  "The delegates the `delegate` tool offers, by name (of `agent.delegates` and `client.agents`); nil offers them all.")
(defsetting agent.delegate-timeout 1800 :number
  "Seconds one delegated turn may take; then the sub-agent is taken for hung, and closed.")
(defsetting agent.delegate-max-chars 50000 :integer
  "Characters of a sub-agent's final text the `delegate` tool returns at most; the head is kept and a footer says how much was cut.")

;; Lines of the tool card's live view: the sub-agent's tool calls kept at most, and characters
;; of its text since the last one.
(local view-max-tools 30)
(local view-max-text 4000)

(fn client [] _G.client)

;;; Profiles

(set agent.delegates (or agent.delegates {}))

(fn agent.defdelegate [name profile]
  "Define the delegate NAME for the `delegate` tool and `agent.delegate`: PROFILE is {:agent
:model :mode :system-prompt :description :fork-session}, :agent the name of an agent
(`client.agents`, or a catalog agent such as \"oml\"), :model and :mode what its sessions are
switched to, :system-prompt instructions sent ahead of the first prompt, :description what the
model is told it is for, :fork-session the id of one of the agent's stored sessions that each
delegation forks (session/fork, when the agent offers it) instead of starting cold: its context
comes along, cheaper with a caching provider. Returns NAME."
  (when (or (not= :string (type name)) (not (name:find "^[%w_%-]+$")))
    (error "agent.defdelegate: the name is a string of letters, digits, - and _" 2))
  (when (or (not= :table (type profile)) (not= :string (type profile.agent)))
    (error "agent.defdelegate: expected (agent.defdelegate :name {:agent :oml :model \"...\" :mode :read-only :system-prompt \"...\"})" 2))
  (each [_ k (ipairs [:model :mode :system-prompt :description :fork-session])]
    (when (and (not= nil (. profile k)) (not= :string (type (. profile k))))
      (error (.. "agent.defdelegate: :" k " is a string") 2)))
  (tset agent.delegates name {:agent profile.agent :model profile.model :mode profile.mode
                              :system-prompt (. profile :system-prompt)
                              :description profile.description
                              :fork-session (. profile :fork-session)})
  name)

(fn agent.delegate-names []
  "The delegates the `delegate` tool offers now: the profiles of `agent.delegates` and the agents
of `client.agents`, limited to `agent.delegate-agents` when set, sorted."
  (let [seen {}
        allowed (oml.setting "agent.delegate-agents")
        ok? (fn [n] (or (= nil allowed) (accumulate [hit false _ a (ipairs allowed)] (or hit (= a n)))))]
    (each [n (pairs agent.delegates)] (when (ok? n) (tset seen n true)))
    (each [n (pairs (or (. (or (client) {}) :agents) {}))] (when (ok? n) (tset seen n true)))
    (let [names (icollect [n (pairs seen)] n)]
      (table.sort names)
      names)))

(fn profile-of [name]
  (or (. agent.delegates name) {:agent name}))

(fn describe-delegate [name]
  (let [p (. agent.delegates name)
        cfg (. (or (. (or (client) {}) :agents) {}) (if p p.agent name))
        program (and cfg (cfg.command:match "([^/]+)$"))]
    (.. name
        (if p
            (.. " (" (or p.description (.. "agent " p.agent)) (if p.model (.. ", model " p.model) "") ")")
            program (.. " (" program ")")
            ""))))

;;; Connections, per oml session and delegate

(fn member? [list x]
  (accumulate [hit false _ v (ipairs list)] (or hit (= v x))))

;; session id (or "" outside a session) -> delegate name -> {:conn :session-id :fresh :busy}
(local live {})

(fn agent.delegate-permission [name request]
  "Answer the permission REQUEST {:tool-call :options} of the sub-agent of the delegate NAME
through oml's own policy: :yolo allows, :read-only rejects, :accept-edits allows edits inside
the workspace, the session's rules decide what they cover, and otherwise `agent.ask-about`
asks the front end about `agent.delegate-call`. Returns an option id, :allow, :reject or :cancel."
  (let [call (agent.delegate-call name request)
        mode (agent.current-permission-mode)
        edit? (or (= call.kind :edit) (= call.kind :delete) (= call.kind :move))
        answer (if (= mode :yolo) :allow-once
                   (= mode :read-only) :reject-once
                   (and (= mode :accept-edits) edit? (agent.inside-workspace? call)) :allow-once
                   (case (agent.rule-verdict call)
                     :allow :allow-once
                     :reject :reject-once
                     _ (agent.ask-about call)))
        option (fn [kind]
                 (accumulate [id nil _ o (ipairs (or request.options [])) &until id]
                   (when (= o.kind kind) o.optionId)))]
    (case answer
      :allow-always (agent.add-permission-rule! (agent.permission-rule call) :allow)
      :reject-always (agent.add-permission-rule! (agent.permission-rule call) :reject))
    (case answer
      :allow-once :allow
      :allow-always (or (option :allow_always) :allow)
      :reject-once :reject
      :reject-always (or (option :reject_always) :reject)
      :cancelled :cancel
      _ :reject)))

(fn agent.delegate-call [name request]
  "The tool call oml's permission flow is asked about for the permission REQUEST of the delegate
NAME's sub-agent: {:id :name :kind :title :args :locations :content :delegate}, :name being NAME,
:title the sub-agent's own prefixed with NAME, :args its raw input (with :path from its first
location), :content its proposed diffs, :id the delegate tool call's."
  (let [tc (if (= :table (type request.tool-call)) request.tool-call {})
        input (collect [k v (pairs (if (= :table (type tc.rawInput)) tc.rawInput {}))] k v)
        locations (if (= :table (type tc.locations)) tc.locations [])]
    (when (and (= nil input.path) (. locations 1) (. locations 1 :path))
      (set input.path (. locations 1 :path)))
    (when (and (= nil input.path) (= :string (type input.file_path)))
      (set input.path input.file_path))
    {:id (or (oml.running-tool) tc.toolCallId (.. "delegate-" name))
     : name
     :kind (or tc.kind :other)
     :title (.. name ": " (or tc.title tc.toolCallId "a tool call"))
     :args input
     : locations
     :content tc.content
     :delegate name}))

(fn pick [options category]
  (accumulate [hit nil _ o (ipairs (or options [])) &until hit]
    (when (= o.category category) o)))

(fn configure! [conn s profile]
  "Switch the sub-agent's new session S to PROFILE's mode and model."
  (let [c (client)]
    (when profile.mode
      (let [modes (and s.modes s.modes.availableModes)
            offered (accumulate [hit false _ m (ipairs (or modes [])) ] (or hit (= m.id profile.mode)))
            option (pick (. s :config-options) :mode)]
        (if offered (c.set-mode conn s.session-id profile.mode)
            option (c.set-config-option conn s.session-id option.id profile.mode)
            (error (.. "the agent offers no mode " profile.mode) 0))))
    (when profile.model
      (let [option (pick (. s :config-options) :model)]
        (if option (c.set-config-option conn s.session-id option.id profile.model)
            s.models (c.set-model conn s.session-id profile.model)
            (error (.. "the agent offers no model choice (wanted " profile.model ")") 0))))))

(fn open! [name]
  (let [c (client)
        profile (profile-of name)
        parent (session.current)
        cwd (session.cwd)
        ask (fn [request]
              (if (and parent (member? (session.list) parent))
                  (session.with parent agent.delegate-permission name request)
                  (agent.delegate-permission name request)))
        conn (c.connect profile.agent {:on-permission ask :cwd cwd})
        base (. profile :fork-session)
        fork? (and base (. (c.capabilities conn) :fork-session))
        (ok s) (if fork?
                   (pcall c.fork-session conn base cwd)
                   (pcall c.new-session conn cwd))
        (ok2 e) (if ok (pcall configure! conn s profile) (values false s))]
    (when (not ok2)
      (c.close conn)
      (error e 0))
    {: conn :session-id s.session-id :fresh true :profile profile}))

(fn agent.delegate [name prompt ?opts]
  "Run one turn of the delegate NAME (a profile of `agent.defdelegate`, or an agent client.connect
knows by name) on PROMPT, in this session's directory, and wait for it. The sub-agent and its
session are opened on first use and kept for this oml session, so a follow-up keeps its context.
?OPTS: :on-update (each update, as client.prompt gives them), :timeout (seconds, default
`agent.delegate-timeout`). Returns client.prompt's result {:stop-reason :text ...}; cancelling
this oml prompt cancels the turn. A failure raises its error; a sub-agent that exited or hung is
closed, and the next call starts a fresh one."
  (let [c (client)
        key (or (session.current) "")
        per (or (. live key) (let [t {}] (tset live key t) t))]
    (when (?. per name :busy)
      (error (.. "the delegate " name " is already working on a turn of this session") 0))
    (when (= nil (. per name))
      (tset per name (open! name)))
    (let [d (. per name)
          sp (. d.profile :system-prompt)
          text (if (and d.fresh sp) (.. sp "\n\n" prompt) prompt)
          _ (do (set d.fresh false) (set d.busy true))
          opts (or ?opts {})
          (ok r) (pcall c.prompt d.conn d.session-id text
                        {:on-update opts.on-update :keep-updates? false
                         :timeout (or opts.timeout (oml.setting "agent.delegate-timeout"))
                         :cancel-with-prompt? (not= nil (session.current))})]
      (set d.busy false)
      (when (not ok)
        (when (not= :agent (oml.error-category r))
          (tset per name nil)
          (c.close d.conn))
        (error r 0))
      r)))

(fn agent.close-delegates [?session-id]
  "Close the sub-agents of the session ?SESSION-ID (default: the current one, or those opened
outside a session), at once, each bounded in time. Called when an oml session ends."
  (let [c (client)
        key (or ?session-id (session.current) "")
        per (. live key)]
    (tset live key nil)
    (when per
      (let [handles (icollect [_ d (pairs per)] (c.spawn c.close d.conn))]
        (each [_ h (ipairs handles)] (pcall c.join h))))
    nil))

;;; The tool

(fn new-view []
  "The tool card's live view of a sub-agent's turn: its text, one line per tool call."
  (let [tools [] by-id {}]
    (var text "")
    {:update (fn [u]
               (case u.kind
                 :agent-message-chunk
                 (when (and (= :table (type u.content)) (= :string (type u.content.text)))
                   (set text (.. text u.content.text))
                   ;; Bytes against characters: 8x leaves room for 4-byte characters, so one
                   ;; cut lasts for many updates.
                   (when (> (length text) (* 8 view-max-text))
                     (set text (oml.keep-tail text view-max-text))))
                 :tool-call
                 (let [t {:title (if (= :string (type u.title)) u.title (or u.toolCallId "tool"))
                          :status (if (= :string (type u.status)) u.status :pending)
                          :before text}]
                   (set text "")
                   (tset by-id (or u.toolCallId "") t)
                   (table.insert tools t)
                   (when (> (length tools) view-max-tools) (table.remove tools 1)))
                 :tool-call-update
                 (let [t (. by-id (or u.toolCallId ""))]
                   (when t
                     (when (= :string (type u.status)) (set t.status u.status))
                     (when (= :string (type u.title)) (set t.title u.title))))))
     :text (fn []
             (let [out []]
               (each [_ t (ipairs tools)]
                 (when (t.before:find "%S") (table.insert out (oml.keep-tail t.before view-max-text)))
                 (table.insert out (.. "- " t.title " (" t.status ")")))
               (table.insert out (oml.keep-tail text view-max-text))
               (table.concat out "\n")))}))

(fn tools.delegate [{:agent name : prompt}]
  {:fnl/docstring "Hand a task to another coding agent and wait for its answer: it works in this directory with its own tools, and its final answer comes back to you. Use it for a second opinion, a review, or work another agent is better at. A follow-up to the same agent keeps its context."
   :kind :other :title "Delegate to {agent}"
   :params {:agent [:string "Which agent: one of the names listed in this description"]
            :prompt [:string "The task, complete and self-contained: the agent sees nothing of this conversation"]}}
  (let [names (agent.delegate-names)]
    (if (not (member? names name))
        {:content (.. "Unknown agent " (tostring name) "; the agents are: " (table.concat names ", "))
         :error? true}
        (let [view (new-view)
              on-update (fn [u] (view.update u) (oml.tool-progress (view.text)))
              (ok r) (pcall agent.delegate name prompt {: on-update})]
          (if (not ok)
              {:content (.. "The agent " name " failed: " (oml.error-message r)) :error? true}
              (let [text (if (r.text:find "%S") r.text "(no answer text)")]
                {:content (.. (oml.cap-head text (oml.setting "agent.delegate-max-chars"))
                              "\n\n[" name " stopped: " r.stop-reason "]")
                 :error? (= r.stop-reason :cancelled)}))))))

(fennel.metadata:set tools.delegate :available? #(< 0 (length (agent.delegate-names))))
(fennel.metadata:set tools.delegate :describe
  #(.. (oml.doc-text (fennel.metadata:get tools.delegate :fnl/docstring))
       " The agents: " (table.concat (icollect [_ n (ipairs (agent.delegate-names))] (describe-delegate n)) "; ") "."))
