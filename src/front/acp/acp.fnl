;; oml as an ACP agent: the Lisp side of `oml acp`.
;;
;; Loaded only in ACP mode, after the agent (agent.fnl) and before the init files, so that init
;; files can redefine and advise everything here. The host (src/front/acp/surface.rs) has put
;; `acp.request!` in place before this file runs. Rust calls `acp.render-event`,
;; `acp.available-commands`, `acp.config-options` and the entries of `acp.methods` by name at call
;; time.

(local oml _G.oml)
(local fennel (require :fennel))
(local acp _G.acp)
(local agent _G.agent)
(local session _G.session)
(local json _G.json)

(local file "src/front/acp/acp.fnl")

(defsetting acp.models [] :table
  "Model ids offered to the ACP client as the choices of the `model` config option, besides the session's current model.")
(defsetting acp.endpoint-models? true :boolean
  "Offer the endpoint's own models (GET <llm.base-url>/models, see `llm.models`) in the model picker, after `acp.models`.")
(defsetting acp.use-client-fs? true :boolean
  "Let `read`, `write` and `edit` go through the editor (fs/read_text_file, fs/write_text_file) when it offers them; false keeps them on the disk.")
(defsetting acp.use-client-terminal? true :boolean
  "Let `bash` run in the editor's terminal (terminal/create, shown live in the tool card) when it offers one, wrapped in oml's sandbox launcher; false runs commands as without one. A command whose network is held to named domains (oml.network-held?) runs as without one anyway: only commands oml starts reach its proxy.")
(defsetting acp.diff-max-bytes 4194304 :integer
  "Bytes of new text oml sends the editor as a `diff` at most: a permission question about a `write` or `edit` whose new text is longer names the file and its size instead, and a `write` through the editor's `fs/write_text_file` ends without a diff, as the write tool's own result has none past 4 MiB. Each copy of such a diff costs as much memory as the file, and no editor renders it better than the line.")
(defsetting repl.server? true :boolean
  "Start the live REPL server (a Unix socket, see `oml repl --connect`) inside `oml acp`.")

;;; Rendering loop events as session/update payloads

(local tool-kinds {:read true :edit true :delete true :move true :search true :execute true
                   :think true :fetch true :switch_mode true :other true})

(fn text-block [text] {:type :text :text (or text "")})

(fn acp.render-event [event session-id]
  "The `session/update` payload (the `update` object) for the loop EVENT of SESSION-ID, or nil to
send nothing. Called by name for every event: text and thought deltas become
agent_message_chunk / agent_thought_chunk, tool-start a tool_call card (status the event's
:status, from `agent.tool-card-status`, else in_progress; rawInput, absolute locations), tool-end a tool_call_update (completed or failed, the text, and for write and edit the
diff with only the text's first line; for a command run in the client's terminal, the terminal,
a failure's last line, and as rawOutput the output the model got), the output of a running command a tool_call_update with its last
lines as a code block (at most ten a second; the forwarder gathers the tail), a plan (`update_plan`) a plan
update, a notice (a retried model request) a line of agent text in italics, a message that joined the
turn from the inbox (`agent.take-posted!`: a steered prompt) a user_message_chunk, and the token usage a model call reports a usage_update (`used`: the
call's prompt and completion tokens, what the context now holds; `size`: `llm.context-window`;
`cost`: the session's cost so far, when `llm.prices` prices its model), so the last update of a
turn is its usage. Must not wait on anything."
  (case event.type
    :text-delta {:sessionUpdate :agent_message_chunk :content (text-block event.text)}
    :thought-delta {:sessionUpdate :agent_thought_chunk :content (text-block event.text)}
    :tool-start (let [u {:sessionUpdate :tool_call :toolCallId event.id
                         :title (if (and (= :string (type event.title)) (event.title:find "%S"))
                                    event.title
                                    event.name)
                         :kind (if (. tool-kinds event.kind) event.kind :other)
                         :status (or event.status :in_progress)
                         :rawInput (or event.args (json.object))}]
                  (when (and (= :table (type event.locations)) (< 0 (length event.locations)))
                    (set u.locations event.locations))
                  u)
    :tool-end (let [terminal (. event :terminal-id)
                    ;; With a diff, the text's own copy of the hunk would show twice: its first
                    ;; line ("Edited path") stays. A terminal shows the output itself: only a
                    ;; failure's last line ("[exit code 1]") is added.
                    text (if (= :table (type event.diff))
                             (or (and event.content (event.content:match "^[^\n]*")) "")
                             terminal
                             (if (. event :error?) (or (event.content:match "([^\n]*)$") "") "")
                             event.content)
                    content (if terminal [{:type :terminal :terminalId terminal}] [])]
                (when (or (not terminal) (text:find "%S"))
                  (table.insert content {:type :content :content (text-block text)}))
                (when (= :table (type event.diff))
                  (table.insert content {:type :diff :path event.diff.path
                                         :oldText (or (. event.diff :old-text) json.null)
                                         :newText (or (. event.diff :new-text) "")}))
                ;; The terminal is gone for a client that records rather than shows (Harbor
                ;; keeps only text): the output the model got goes along as rawOutput.
                {:sessionUpdate :tool_call_update :toolCallId event.id
                 :status (if (. event :error?) :failed :completed)
                 : content :rawOutput (when terminal (or event.content ""))
                 :_meta event.meta})
    :plan {:sessionUpdate :plan :entries (or event.entries (json.array))}
    :notice {:sessionUpdate :agent_message_chunk
             :content (text-block (.. "\n*" (or event.text "") "*\n"))}
    :user-message {:sessionUpdate (if (= event.role :user) :user_message_chunk :agent_message_chunk)
                   :content (text-block (or event.text ""))}
    :tool-output {:sessionUpdate :tool_call_update :toolCallId event.id
                  :content [{:type :content
                             :content (text-block (.. "```\n" (or event.text "") "\n```"))}]}
    :usage (let [u event.usage
                 used (when (= :table (type u))
                        (or (tonumber u.total_tokens)
                            (+ (or (tonumber u.prompt_tokens) 0)
                               (or (tonumber u.completion_tokens) 0))))]
             (when used
               (let [total (session.get :usage session-id)
                     cost (and (= :table (type total)) (tonumber total.cost))]
                 {:sessionUpdate :usage_update : used
                  :size (oml.setting "llm.context-window")
                  :cost (when cost {:amount cost :currency (oml.setting "llm.price-currency")})})))
    _ nil))

;;; Slash commands, modes and config options as the client sees them

(fn acp.available-commands []
  "The slash commands as ACP AvailableCommand entries: {:name :description :input {:hint}}."
  (icollect [_ e (ipairs (agent.commands))]
    (let [hint (fennel.metadata:get e.fn :hint)
          c {:name e.name
             :description (oml.summary (fennel.metadata:get e.fn :fnl/docstring))}]
      (when (= :string (type hint)) (set c.input {: hint}))
      c)))

;; The session modes the client is offered: `agent.permission-modes`, as ACP SessionMode objects.
(set acp.modes
     (icollect [_ m (ipairs agent.permission-modes)]
       {:id m.id :name m.name :description m.description}))

(fn acp.current-model [?session-id]
  "The model shown in the session's model picker: `agent.current-model`, or \"none\" when no
model is configured (what /model says too)."
  (or (agent.current-model ?session-id) "none"))

(fn acp.modes-state [?session-id]
  "The `modes` object of a session: {:currentModeId :availableModes}."
  {:currentModeId (agent.current-permission-mode ?session-id)
   :availableModes acp.modes})

(fn acp.endpoint-models []
  "The endpoint's own model list for the picker: `llm.models` when `acp.endpoint-models?`, else
empty (also when the endpoint gives none)."
  (if (oml.setting "acp.endpoint-models?")
      (let [(ok ids) (pcall _G.llm.models)] (if ok ids []))
      []))

(fn acp.config-options [?session-id]
  "The session's ACP config options: the permission mode (category mode), the model (category
model, choices: the current model, the configured `llm.model`, `acp.models`, then the
endpoint's list, `acp.endpoint-models`), and, to a client that takes boolean options, the
boolean `network` (`agent.session-network?`)."
  (let [mode (agent.current-permission-mode ?session-id)
        model (acp.current-model ?session-id)
        models [model]
        candidates [(oml.setting "llm.model")]]
    (each [_ m (ipairs (or _G.acp.models []))] (table.insert candidates m))
    (each [_ m (ipairs (acp.endpoint-models))] (table.insert candidates m))
    ;; The configured model stays offered after a switch, so there is a way back.
    (each [_ m (ipairs candidates)]
      (when (and (= :string (type m)) (not (accumulate [seen false _ x (ipairs models)]
                                               (or seen (= x m)))))
        (table.insert models m)))
    (let [options [{:id :mode :name "Permission mode" :category :mode :type :select :currentValue mode
                    :options (icollect [_ m (ipairs acp.modes)]
                               {:value m.id :name m.name :description m.description})}
                   {:id :model :name "Model" :category :model :type :select :currentValue model
                    :options (icollect [_ m (ipairs models)] {:value m :name m})}]]
      (when (acp.client-boolean-options?)
        (table.insert options
                      {:id :network :name "Network for commands" :type :boolean
                       :description "Let this session's commands open TCP connections (sandbox.network? for this session)"
                       :currentValue (agent.session-network? ?session-id)}))
      options)))

(fn acp.client-boolean-options? []
  "Whether the ACP client takes boolean config options (clientCapabilities.session.configOptions
.boolean in `initialize`): only then is the session's `network` switch offered."
  (let [caps acp.client-capabilities
        b (and (= :table (type caps)) (= :table (type caps.session))
               (= :table (type caps.session.configOptions)) caps.session.configOptions.boolean)]
    (= :table (type b))))

(fn acp.set-config-option! [config-id value ?session-id]
  "Set the config option CONFIG-ID (:mode, :model, or the boolean :network) of the session to
VALUE; errors name what is wrong."
  (case config-id
    :mode (do (when (not (accumulate [ok false _ m (ipairs acp.modes)] (or ok (= m.id value))))
                (error (.. "Unknown mode: " (tostring value)) 0))
              (session.put! :permission-mode value ?session-id))
    :model (do (when (or (not= :string (type value)) (not (value:find "%S")))
                 (error "The model must be a non-empty string" 0))
               (session.put! :model value ?session-id))
    :network (do (when (not= :boolean (type value))
                   (error "network is a boolean option: true or false" 0))
                 (session.put! :network? value ?session-id))
    _ (error (.. "Unknown config option: " (tostring config-id)) 0)))

;;; Asking the client

(set acp.permission-options
     [{:optionId :allow_once :name "Allow once" :kind :allow_once}
      {:optionId :allow_always :name "Always allow" :kind :allow_always}
      {:optionId :reject_once :name "Reject" :kind :reject_once}
      {:optionId :reject_always :name "Always reject" :kind :reject_always}])

(fn acp.request-permission [tool-call ?options]
  "Ask the client whether TOOL-CALL (an ACP ToolCallUpdate such as {:toolCallId :title
:rawInput}) may run, offering ?OPTIONS (default `acp.permission-options`: allow_once,
allow_always, reject_once, reject_always, each optionId equal to its kind). Returns the outcome:
{:outcome :selected :optionId :kind} or {:outcome :cancelled} (also when the prompt is cancelled
while waiting). An error answer is an error."
  (let [options (or ?options acp.permission-options)
        (ok result) (pcall acp.request! "session/request_permission"
                           {:sessionId (session.current) :toolCall tool-call : options})]
    (if (not ok)
        (if (= :cancelled (oml.error-category result))
            {:outcome :cancelled}
            (error (oml.error-message result) 0))
        (let [outcome (or (and (= :table (type result)) result.outcome) {:outcome :cancelled})]
          (when (= outcome.outcome :selected)
            (each [_ o (ipairs options)]
              (when (= o.optionId outcome.optionId) (set outcome.kind o.kind))))
          outcome))))

(local answers {:allow_once :allow-once :allow_always :allow-always
                :reject_once :reject-once :reject_always :reject-always})

(fn too-large [name path bytes]
  [{:type :content
    :content (text-block (string.format "This %s changes %s: %d bytes of new text, too large to show as a diff (acp.diff-max-bytes)."
                                        name (or path "a file") bytes))}])

(fn question-content [call]
  ;; The question's content for a write or edit CALL: the proposed change as a diff, a line
  ;; naming its size when the new text is over acp.diff-max-bytes (a write's content
  ;; is measured before any preview copies it), or why it would fail.
  (let [args (or call.args {})
        max (oml.setting "acp.diff-max-bytes")
        content (and (= call.name :write) args.content)]
    (if (and (= :string (type content)) (> (length content) max))
        (too-large call.name args.path (length content))
        (let [(diff why) (acp.preview-change call.name args)
              new-text (and diff (. diff :new-text))]
          (if (and (= :string (type new-text)) (> (length new-text) max))
              (too-large call.name diff.path (length new-text))
              diff
              [{:type :diff :path diff.path :oldText (or (. diff :old-text) json.null)
                :newText new-text}]
              [{:type :content :content (text-block (.. "This " call.name " would fail: " (or why "")))}])))))

(fn acp.permission-tool-call [call]
  "The `toolCall` of the permission request for the tool CALL {:id :name :args :kind :title
:locations}: the card's own title, kind, raw input (`agent.card-args`) and locations, status pending, and for write
and edit the proposed change as `diff` content (`acp.preview-change`: from the editor's buffer
when the tool writes through the editor), computed before anything is written (or the reason it
would fail, as text; or, when the new text is over `acp.diff-max-bytes`, a line naming the file
and its size); a call with :content (a delegated agent's) carries that."
  (let [tc {:toolCallId call.id
            :title (if (and (= :string (type call.title)) (call.title:find "%S")) call.title call.name)
            :kind (if (. tool-kinds call.kind) call.kind :other)
            :status :pending
            :rawInput (agent.card-args (or call.args (json.object)))}]
    (when (and (= :table (type call.locations)) (< 0 (length call.locations)))
      (set tc.locations call.locations))
    ;; A delegated agent's request brings its own content (its proposed diffs).
    (when (= :table (type call.content))
      (set tc.content call.content))
    (when (or (= call.name :write) (= call.name :edit))
      (set tc.content (question-content call)))
    tc))

(fn acp.permission-options-for [call]
  "The options offered for the tool CALL: `acp.permission-options`, with the \"always\" ones
naming the rule they add (`agent.permission-rule`)."
  (let [rule (agent.describe-rule (agent.permission-rule call))]
    (icollect [_ o (ipairs acp.permission-options)]
      (case o.kind
        :allow_always (doto (collect [k v (pairs o)] k v) (tset :name (.. "Always allow " rule)))
        :reject_always (doto (collect [k v (pairs o)] k v) (tset :name (.. "Always reject " rule)))
        _ o))))

(fn agent.ask-permission [call]
  "In ACP mode: ask the client with `acp.request-permission` whether the tool CALL {:id :name
:args :kind :title :locations} may run (its tool card has already been sent), showing
`acp.permission-tool-call` and `acp.permission-options-for`. The card is pending while the
question waits and in_progress once allowed (for a card that started pending, by
`agent.on-tool-allowed`). Returns :allow-once, :allow-always, :reject-once, :reject-always or
:cancelled."
  (let [outcome (acp.request-permission (acp.permission-tool-call call)
                                        (acp.permission-options-for call))
        answer (if (= outcome.outcome :selected)
                   (or (. answers outcome.kind) :reject-once)
                   :cancelled)]
    (when (and (or (= answer :allow-once) (= answer :allow-always)) (not= call.status :pending))
      (acp.update! {:sessionUpdate :tool_call_update :toolCallId call.id :status :in_progress}))
    answer))

;; The tool kinds the default permission policy may ask about (`agent.check-permission`).
(local asked-kinds {:edit true :delete true :move true :execute true})

(fn agent.tool-card-status [call]
  "In ACP mode: :pending when the permission policy may ask about the tool CALL {:id :name
:args :kind :mcp} before it runs, so that its card is pending from its first tool_call: a tool
of kind edit, delete, move or execute, or an MCP server's tool not marked read-only, in a mode
other than yolo and read-only. nil (in progress) for the others. A guess made before the policy
runs: a pending card the policy lets run without asking turns in_progress then
(`agent.on-tool-allowed`)."
  (let [mode (agent.current-permission-mode)
        asked? (if call.mcp (not call.mcp.read-only?) (. asked-kinds call.kind))]
    (when (and asked? (not= mode :yolo) (not= mode :read-only)) :pending)))

;; A tool's card completes in the editor as the tool ends, not when the turn next waits: the
;; card's update is rendered by Lisp, which the running turn holds until it waits for something.
(oml.advise* "agent.run-tool-call" :acp-flush
  (fn [run-tool-call ...]
    (let [result (run-tool-call ...)]
      (acp.flush!)
      result)))

(fn agent.on-tool-allowed [call]
  "In ACP mode: the card of the tool CALL, when it started pending (its :status, from
`agent.tool-card-status`), turns in_progress as the permission policy lets the tool run."
  (when (= call.status :pending)
    (acp.update! {:sessionUpdate :tool_call_update :toolCallId call.id :status :in_progress})))

;;; The editor's files: read, write and edit through the client when it offers fs

;; What the client offered in `initialize` (the front end sets it); nothing until then.
(set acp.client-capabilities {})

(fn acp.client-fs? [what]
  "Whether the ACP client offered fs/read_text_file (WHAT :read) or fs/write_text_file (:write)
in `initialize` (`acp.client-capabilities`) and `acp.use-client-fs?` allows using it."
  (let [caps acp.client-capabilities
        fs (and (= :table (type caps)) caps.fs)]
    (and (oml.setting "acp.use-client-fs?")
         (= :table (type fs)) (= true (. fs (if (= what :read) :readTextFile :writeTextFile))))))

(fn acp.client-read [path]
  "The text of the file PATH (absolute) as the editor has it (its unsaved buffer too), through
fs/read_text_file. An error answer is an error."
  (let [r (acp.request! "fs/read_text_file" {:sessionId (session.current) : path})]
    (or (and (= :table (type r)) r.content) "")))

(fn acp.client-write [path content]
  "Write CONTENT to the file PATH (absolute) through fs/write_text_file, so the editor's buffer
follows. An error answer is an error."
  (acp.request! "fs/write_text_file" {:sessionId (session.current) : path : content})
  nil)

(fn resolved [args]
  (let [(ok abs) (pcall session.resolve-path (or (and args args.path) ""))]
    (when ok abs)))

(fn client-error [what path e]
  {:content (.. "Could not " what " " path " through the editor: " (oml.error-message e))
   :error? true})

(fn client-text [path]
  "The file's text: the editor's when it offers reading, else the disk's; nil when missing."
  (if (acp.client-fs? :read)
      (let [(ok text) (pcall acp.client-read path)] (when ok text))
      (let [f (io.open path :rb)]
        (when f (let [t (f:read :a)] (f:close) t)))))

(fn acp.preview-change [name args]
  "The change the tool call NAME (\"write\" or \"edit\") with ARGS would make, as
`oml.preview-change` gives it ({:path :old-text :new-text}, or nil and the reason it would fail),
worked out on the text the tool will change: the editor's (fs/read_text_file, its unsaved buffer
too) when the tool writes through the editor (`acp.client-fs?`), else the disk's."
  (let [path (resolved args)
        text (when (and path (acp.client-fs? :write)) (client-text path))]
    (if (and path (acp.client-fs? :write) (= name :write) (= :string (type args.content)))
        {: path :old-text text :new-text args.content}
        (and text (= name :edit))
        (let [r (oml.edit-text text path args)]
          (if (. r :new-text) r.diff (values nil r.content)))
        (oml.preview-change name args))))

(fn agent.change-failure [call]
  "Why oml's own write or edit CALL would fail if it ran, or nil (see the default in
permission.fnl): `acp.preview-change`, so on the editor's text when the tool writes through the
editor, the text the question's diff would show."
  (when (and (not call.mcp) (or (= call.name :write) (= call.name :edit)))
    (let [(ok diff why) (pcall acp.preview-change call.name (or call.args {}))]
      (when (and ok (not diff)) why))))

(oml.advise* "tools.read" :client-fs
  (fn [read args]
    (let [path (resolved args)]
      ;; An image is read from the disk: the editor serves text only.
      (if (not (and path (acp.client-fs? :read) (not (oml.image-mime path)))) (read args)
          (let [(ok text) (pcall acp.client-read path)]
            (if ok
                (oml.read-text text path (tonumber args.offset) (tonumber args.limit)
                               _G.tools.read-max-chars _G.tools.read-default-limit)
                (client-error "read" path text)))))))

(oml.advise* "tools.write" :client-fs
  (fn [write args]
    (let [path (resolved args)]
      (if (not (and path (acp.client-fs? :write) (= :string (type args.content)))) (write args)
          (let [old (client-text path)
                (ok e) (pcall acp.client-write path args.content)]
            (if ok
                (let [n (length args.content)]
                  {:content (.. "Wrote " n (if (= n 1) " byte" " bytes") " to " path)
                   :diff (when (<= n (oml.setting "acp.diff-max-bytes"))
                           {: path :old-text old :new-text args.content})})
                (client-error "write" path e)))))))

(oml.advise* "tools.edit" :client-fs
  (fn [edit args]
    (let [path (resolved args)]
      (if (not (and path (acp.client-fs? :write))) (edit args)
          (let [text (client-text path)]
            (if (not text) (edit args)
                (let [r (oml.edit-text text path args)]
                  (if (not r.new-text) r
                      (let [(ok e) (pcall acp.client-write path (. r :new-text))]
                        (if ok r (client-error "write" path e)))))))))))

;;; /rewind puts files back through the editor too, and says which

(fn agent.write-restored [path content session-id]
  "In ACP mode: a file `session.rewind` puts back (PATH, its earlier CONTENT) goes through
fs/write_text_file when the editor offers it (`acp.client-fs?`) and CONTENT is text (UTF-8), so
the editor's buffer follows, as with `write` and `edit`; true then. Nil otherwise: the disk is
written. The editor's error answer is an error (the file is named as not put back)."
  (when (and (acp.client-fs? :write) (utf8.len content))
    (acp.request! "fs/write_text_file" {:sessionId session-id : path : content} session-id)
    true))

(var rewind-cards 0)

(oml.advise* "agent.on-rewound" :acp-card
  (fn [on-rewound r]
    (on-rewound r)
    ;; A card of kind edit with the files as its locations: the editor can reload their
    ;; buffers (the removed ones were deleted on the disk, which ACP cannot ask it to do).
    (let [lines (icollect [_ p (ipairs (or r.restored []))] (.. "Restored " p))]
      (each [_ p (ipairs (or r.removed []))] (table.insert lines (.. "Removed " p)))
      (when (< 0 (length lines))
        (set rewind-cards (+ rewind-cards 1))
        (let [id (.. "rewind-" (os.time) "-" rewind-cards)
              paths (icollect [_ p (ipairs (or r.restored []))] p)]
          (each [_ p (ipairs (or r.removed []))] (table.insert paths p))
          (session.emit! {:type :tool-start : id :name :rewind :kind :edit
                          :title (.. "Rewind to just before prompt " r.prompt)
                          :args {:prompt r.prompt}
                          :locations (icollect [_ p (ipairs paths)] {:path p})})
          (session.emit! {:type :tool-end : id :content (table.concat lines "\n")}))))))

;;; Commands in the editor's terminal

(fn acp.client-terminal? []
  "Whether the ACP client offered `terminal` in `initialize` (`acp.client-capabilities`) and
`acp.use-client-terminal?` allows using it."
  (let [caps acp.client-capabilities]
    (and (oml.setting "acp.use-client-terminal?") (= :table (type caps)) (= true caps.terminal))))

(oml.advise* "tools.bash" :client-terminal
  (fn [bash args]
    (if (and (acp.client-terminal?) (not (oml.network-held?)))
        (acp.terminal-bash (or (and args args.command) "")
                           (or (and args (tonumber args.timeout)) _G.tools.bash-timeout)
                           _G.tools.bash-max-chars)
        (bash args))))

;;; Extension methods and hooks

(set acp.methods (or acp.methods {}))

(fn session.on-session-start [session-id]
  "Called after the session/new response is written, with the new session SESSION-ID current
(after the project init file ran). Redefine or advise it; it may call `acp.request!`."
  nil)

(fn acp.sessions []
  "The ids of the ACP sessions, sorted."
  (session.list))

;;; Asking the user: the editor's elicitation

(fn acp.client-elicitation? []
  "Whether the ACP client offered form elicitation in `initialize`
(clientCapabilities.elicitation.form, in `acp.client-capabilities`)."
  (let [caps acp.client-capabilities
        e (and (= :table (type caps)) caps.elicitation)]
    (and (= :table (type e)) (= :table (type e.form)))))

(fn acp.client-elicitation-url? []
  "Whether the ACP client answers URL-mode elicitation (clientCapabilities.elicitation.url)."
  (let [caps acp.client-capabilities
        e (and (= :table (type caps)) caps.elicitation)]
    (and (= :table (type e)) (= :table (type e.url)))))

(var elicitations 0)

(fn elicitation-params [request]
  (if request.url
      (do (set elicitations (+ elicitations 1))
          {:mode :url :sessionId (session.current) :message (or request.message "")
           :url request.url :elicitationId (.. "oml-" (os.time) "-" elicitations)})
      {:mode :form :sessionId (session.current) :message (or request.message "")
       :requestedSchema (or request.schema {:type :object :properties {}})}))

(fn acp.elicit [request]
  "Ask the editor REQUEST.message through elicitation/create, scoped to the running session: with
the form REQUEST.schema (form mode), or sending the user to REQUEST.url (URL mode, with a fresh
elicitationId). Returns its answer ({:action :accept :content {...}} or {:action :accept} for a
URL, {:action :decline} or {:action :cancel}). A cancelled prompt answers {:action :cancel} (and
the editor is sent $/cancel_request); an error answer is an error."
  (let [(ok result) (pcall acp.request! "elicitation/create" (elicitation-params request))]
    (if ok result
        (= :cancelled (oml.error-category result)) {:action :cancel}
        (error (oml.error-message result) 0))))

;; `agent.ask-user` asks the editor when it can.
(oml.advise* "agent.ask-user" :acp-elicitation
  (fn [ask-user request]
    (if (and request.url (acp.client-elicitation-url?)) (acp.elicit request)
        request.url (values nil "the editor cannot send the user to a URL (no URL elicitation)")
        (acp.client-elicitation?) (acp.elicit request)
        (let [(answer why) (ask-user request)]
          (if (= nil answer)
              (values nil "the editor offers no way to ask (no elicitation capability)")
              answer)))))

(oml.advise* "agent.can-ask-user?" :acp-elicitation
  (fn [_can-ask?] (acp.client-elicitation?)))
