;; The agent loop as named steps. The built-in tools are in tools.fnl, the permission policy
;; in permission.fnl, the slash commands in commands.fnl and compaction in compact.fnl, loaded
;; after this file.
;;
;; Every step is a function in the `agent` table, and every call between steps goes through the
;; table (`(agent.call-model ...)`), so redefining or advising a step from an init file, /eval or
;; the live REPL changes the next call. Tools are documented functions in the tables named by
;; `agent.tool-tables`; commands are documented functions in the tables named by
;; `agent.command-tables`; discovery.fnl, loaded right after this file, finds them and says what
;; the model is told of a tool. The host (src/agent/) has put the `session.*` primitives and the
;; Rust tool implementations (`oml.tool-read` ...) in place before this file runs.

(local oml _G.oml)
(local fennel (require :fennel))
(local agent _G.agent)
(local tools _G.tools)
(local commands _G.commands)
(local session _G.session)
(local project _G.project)
(local json _G.json)

(local file "src/agent/agent.fnl")

;;; Settings

(defsetting agent.max-turns 30 :integer
  "Model calls one prompt may make; the tools of the last call still run.")
(defsetting agent.append-system-prompt nil :string?
  "Text added as the last part of the system prompt (print mode's --append-system-prompt); nil adds nothing.")
;; The permission modes and what each does, as `agent.check-permission` decides: the one table the
;; setting's doc, `acp.modes` and docs/src/editors.md are made from (tests/docs.rs checks them).
(set agent.permission-modes
     [{:id :ask :name "Ask" :description "edits, commands and MCP tools not marked read-only ask before they run"}
      {:id :accept-edits :name "Accept edits" :description "edits inside the workspace run, except in .oml/, .git/, other agents' .claude/, .codex/ and .mcp.json, and oml's own folders; commands run while the sandbox confines them; the rest asks"}
      {:id :yolo :name "Yolo" :description "every tool runs without asking; commands stay confined unless the sandbox is off"}
      {:id :read-only :name "Read only" :description "edits, commands and MCP tools not marked read-only are refused"}])
(local modes (icollect [_ m (ipairs agent.permission-modes)] m.id))
(defsetting agent.permission-mode :ask modes
  (.. "Default permission mode of new sessions, one of `agent.permission-modes`:"
      (table.concat (icollect [_ m (ipairs agent.permission-modes)] (.. " :" m.id ": " m.description ".")))))
(defsetting agent.print-mode-permission :accept-edits modes
  "Permission mode of `oml -p` when --mode is not given: :accept-edits, so edits inside the project and sandboxed commands run and everything else is refused (nobody can be asked).")

;; Compaction
(defsetting llm.context-window 128000 :integer
  "Tokens the model's context holds; compaction starts relative to it.")
(defsetting agent.compact-at 0.8 :number
  "Compact the transcript before a model call when its estimated size passes this fraction of `llm.context-window` (0 turns automatic compaction off).")
(defsetting agent.compact-keep 0.3 :number
  "The fraction of `llm.context-window` that compaction keeps verbatim at the end of the transcript.")

;;; Helpers

(fn trim [s] (or (s:match "^%s*(.-)%s*$") ""))

;; `oml.error-message` (the text of a caught error value) is a host function: src/lisp/host.rs.

(fn oml.doc-text [doc]
  "DOC trimmed, paragraphs kept, line breaks inside a paragraph collapsed to single spaces."
  (let [paras []]
    (each [para (string.gmatch (.. (or doc "") "\n\n") "(.-)\n[ \t]*\n")]
      (let [p (trim (para:gsub "%s*\n%s*" " "))]
        (when (not= p "") (table.insert paras p))))
    (table.concat paras "\n\n")))

(fn meta [f key] (when f (fennel.metadata:get f key)))

;; Output capture for commands: what `print` writes while F runs (the host's capture, yield-safe
;; because the call in between is Lua's own xpcall).
(fn capture [f]
  "Call F with print captured; returns ok, value-or-error, printed text."
  (let [previous (oml.capture-begin)
        (ok v) (xpcall f (fn [e] e))]
    (values ok v (oml.capture-end previous))))

;;; The loop

(fn agent.base-prompt []
  "The briefing at the head of the system prompt: who the agent is and how it works with its
tools. The environment and the project's instructions follow it (`agent.system-prompt-parts`)."
  (.. "You are oml, a coding agent working in the user's project through tools. You read and change files, search the code and run commands to do software engineering tasks: fixing bugs, adding features, refactoring, explaining code, running and fixing tests.\n\n"
      "How to work:\n"
      "- Look before you act: find code with grep, find and ls, and read a file before you edit it. Never guess a file's content.\n"
      "- Change files with edit (exact, unique old_text; several edits in one call when they belong together); use write only for new files or complete rewrites.\n"
      "- Run commands with bash: builds, tests, linters, git. After a change, run the project's tests or build when there are any, and fix what you broke.\n"
      "- Follow the project's conventions and instructions; keep changes focused on the task.\n"
      "- When a tool fails, read its message and adjust; do not repeat the same call unchanged.\n"
      "- Answer briefly: say what you did, what you found, and anything the user must decide. Quote paths as path:line."))

(fn agent.environment [?dir]
  "The environment block of the system prompt for the session directory ?DIR (default: the
session's): the directory, date, OS, shell, and whether it is a git repository (its branch and a
short status, computed within a time limit)."
  (let [dir (or ?dir (session.cwd))
        git (project.git dir)]
    (.. "Environment:\n"
        "The working directory is " dir ".\n"
        "- Date: " (os.date "%Y-%m-%d") "\n"
        "- OS: " (project.platform) "\n"
        "- Shell: " (or (os.getenv "SHELL") "unknown") "\n"
        "- Git: " (if git git "not a git repository"))))

(fn agent.instructions-text [files]
  "The instructions block of the system prompt for FILES (from `project.instructions`), or nil
when there are none: each file under its path, in order, with what was cut or could not be read."
  (let [cap (oml.setting "project.instructions-max-chars")
        cut (accumulate [n 0 _ f (ipairs files)] (+ n f.cut))
        parts []]
    (each [_ f (ipairs files)]
      (table.insert parts
                    (if f.problem
                        (.. "## " f.path "\n(not included: the file " f.problem ")")
                        (.. "## " f.path "\n" (trim f.text)))))
    (when (< 0 (length parts))
      (.. "Project instructions: the files below were written for agents working here. Follow them; a later file (nearer the working directory) wins over an earlier one."
          (if (< 0 cut)
              (.. " They are capped at " cap " characters (project.instructions-max-chars); " cut " characters were cut, so read the files themselves for the rest.")
              "")
          "\n\n" (table.concat parts "\n\n")))))

(fn agent.system-prompt-parts [?dir]
  "The parts of the default system prompt, in order, each {:source :text}: the briefing
(`agent.base-prompt`, or a sub-agent's own prompt, its session's :agent-prompt), the environment (`agent.environment`), the project's instructions
(`project.instructions`), the skills (`agent.skills-text`) and `agent.append-system-prompt` when set. `/context` shows them."
  (let [dir (or ?dir (session.cwd))
        files (project.instructions dir)
        instructions (agent.instructions-text files)
        own (session.get :agent-prompt)
        parts [(if (and (= :string (type own)) (own:find "%S"))
                   {:source "the sub-agent's definition" :text own}
                   {:source "agent.base-prompt" :text (agent.base-prompt)})
               {:source "agent.environment" :text (agent.environment dir)}]]
    (when instructions
      (table.insert parts {:source (table.concat (icollect [_ f (ipairs files)] f.path) ", ")
                           :text instructions}))
    (let [skills (and agent.skills-text (agent.skills-text dir))]
      (when skills (table.insert parts {:source "skills (agent.skills-text)" :text skills})))
    (let [agents (and agent.agents-text (agent.agents-text dir))]
      (when agents (table.insert parts {:source "sub-agents (agent.agents-text)" :text agents})))
    (when (and agent.append-system-prompt (agent.append-system-prompt:find "%S"))
      (table.insert parts {:source "agent.append-system-prompt" :text agent.append-system-prompt}))
    parts))

(fn agent.system-prompt []
  "The system prompt, rebuilt for every model request (never stored in the transcript): the
parts of `agent.system-prompt-parts` joined. Redefine this to replace the whole prompt."
  (table.concat (icollect [_ p (ipairs (agent.system-prompt-parts))] p.text) "\n\n"))

(fn agent.build-request [messages]
  "The request for the next model call: the system prompt, then MESSAGES (the transcript), and
every tool."
  (let [msgs [{:role :system :content (agent.system-prompt)}]]
    (each [_ m (ipairs messages)] (table.insert msgs m))
    {:messages msgs
     :tools (icollect [_ e (ipairs (agent.tools))] (agent.tool-spec e))}))

(fn agent.cut-off-message [text err]
  "The assistant message kept for TEXT, what streamed before the model call failed with ERR:
TEXT, then a line saying that the answer was cut off and why (the model and a replay read it)."
  {:role :assistant
   :content (.. text "\n\n[This answer was cut off: " (oml.error-message err) "]")})

(fn agent.call-model [request]
  "One model call through `llm.chat`: REQUEST is {:messages :tools :model :api :silent?}. Streams
text and thought deltas to the session unless :silent?; returns llm.chat's response
{:message :text :finish-reason :usage :cancelled :tool-calls}. The deltas go to the session
through `session.delta-forwarder`. The model is REQUEST's :model, else this session's override
(/model), else `llm.model`; the protocol REQUEST's :api, else this session's (/api), else
`llm.api`."
  (let [chat (. _G.llm :chat)
        sid (session.current)]
    (when (not= :function (type chat))
      (error "llm.chat is not defined: the model client binding is missing" 0))
    ;; The forwarder emits text and thought deltas through session.emit!; llm.chat delivers
    ;; them without the round trip through Lisp while session.emit! is unadvised.
    (when (and sid (not request.silent?))
      (agent.protocol-notice (or request.model (agent.current-model))
                             (or request.api (agent.current-api))))
    (let [on-event (when (and sid (not request.silent?)) (session.delta-forwarder sid))
          (ok response) (pcall chat {:messages request.messages
                                     :tools (or request.tools (json.array))
                                     :model (or request.model (agent.current-model))
                                     :api (or request.api (agent.current-api))}
                               {: on-event :session sid})]
      (when (not ok)
        ;; Text streamed before the failure stays in the conversation, as a cancelled call's
        ;; does (only text: tool calls without results are no valid transcript), marked cut off.
        (let [text (and (= :table (type response)) (= :table (type response.partial))
                        response.partial.text)]
          (when (and sid (not request.silent?) (= :string (type text)) (text:find "%S"))
            (session.append-message! (agent.cut-off-message text response) sid)))
        (error response 0))
      (agent.add-usage! response.usage (or request.model (agent.current-model)))
      (when (and sid (= :table (type response.usage)))
        (session.emit! {:type :usage :usage response.usage} sid))
      response)))

(fn parse-arguments [s]
  "The tool call's JSON arguments as a table, or nil and the parse error."
  (if (or (= nil s) (= s json.null) (not (tostring s)) (not (: (tostring s) :find "%S")))
      {}
      (let [(ok v) (pcall json.decode s)]
        (if (not ok) (values nil (oml.error-message v))
            (or (not= :table (type v)) (json.array? v)) (values nil "tool arguments must be a JSON object")
            v))))

(fn tool-title [entry name args]
  (let [title (and entry (or (meta entry.fn :title) entry.title))]
    (if (= :string (type title))
        (let [t (pick-values 1 (title:gsub "{([%w_%-]+)}" (fn [k] (let [v (. args k)] (if (= nil v) "" (tostring v))))))]
          (if (t:find "%S") (trim t) name))
        (= :function (type title))
        (let [(ok t) (pcall title args)] (if (and ok (= :string (type t))) t name))
        name)))

(fn tool-locations [args]
  (let [p args.path]
    (if (and (= :string (type p)) (p:find "%S"))
        (let [(ok abs) (pcall session.resolve-path p)]
          (if ok [{:path abs}] (json.array)))
        (json.array))))

(fn normalize-result [r]
  (if (= :string (type r)) {:content r :error? false}
      (= nil r) {:content "" :error? false}
      (and (= :table (type r)) (not= nil r.content))
      {:content (if (= :string (type r.content)) r.content (fennel.view r.content))
       :error? (= true r.error?) :diff r.diff :terminal-id (. r :terminal-id) :images r.images
       :exit r.exit :meta r.meta}
      {:content (fennel.view r) :error? false}))

;; What a replay may show of a thought or a diff the transcript does not keep, at most.
(local record-max-chars 65536)

(fn record-thought! [response]
  "Record the response's reasoning for replays when the transcript does not keep it."
  (let [r response.reasoning
        m response.message]
    (when (and (= :string (type r)) (r:find "%S") (<= (length r) record-max-chars)
               (not (and (= :table (type m)) (or m.reasoning_content m.reasoning))))
      (session.record! :thought {:text r}))))

(fn replay-diff [diff]
  "DIFF, when small enough to be kept for replays."
  (when (and (= :table (type diff))
             (<= (+ (length (or (. diff :old-text) "")) (length (or (. diff :new-text) "")))
                 record-max-chars))
    diff))

(fn agent.tool-card-status [call]
  "The status the card of the tool CALL {:id :name :args :kind :mcp} starts with, as its
tool-start event's :status: nil (in progress) here; `oml acp` redefines it, :pending for a call
the permission policy may ask about."
  nil)

(fn agent.on-tool-allowed [call]
  "Called by `agent.execute-tool` when the permission policy lets the tool CALL (with the :status
its card started with) run, just before it runs. Does nothing here; `oml acp` redefines it to
turn a pending card in_progress."
  nil)

;; The tool call each coroutine is running, by coroutine (weak keys): `agent.running-call-id`.
(local running-calls (setmetatable {} {:__mode :k}))

(fn agent.running-call-id []
  "The id of the tool call this coroutine is running (its card), or nil. Unlike
`oml.running-tool`, right for calls running in parallel."
  (. running-calls (coroutine.running)))

(fn agent.run-tool-call [call]
  "Run one OpenAI tool call {:id :function {:name :arguments}}: parse the arguments, show the
tool card (tool-start, its :status from `agent.tool-card-status`), call `agent.execute-tool`,
report the end (tool-end). Returns
{:content :error? :diff :terminal-id :exit}. Never throws: a parse error, an unknown tool or a failing tool is an
error result the model reads."
  (let [id call.id
        fun (or (. call :function) {})
        name (or fun.name "")
        (args perr) (parse-arguments fun.arguments)
        entry (agent.find-tool name)
        kind (or (and entry (or entry.kind (meta entry.fn :kind))) :other)
        mcp (and entry entry.mcp)
        shown (or args {})
        (title-ok title) (pcall tool-title entry name shown)
        title (if title-ok title name)
        (loc-ok locations) (pcall tool-locations shown)
        (status-ok status) (pcall agent.tool-card-status {: id : name :args shown : kind : mcp})
        status (when (and status-ok (= :string (type status))) status)]
    (session.emit! {:type :tool-start : id : name :args (agent.card-args shown) : kind : title : status
                    :locations (if loc-ok locations (json.array))})
    (tset running-calls (coroutine.running) id)
    (let [result (if perr
                     {:content perr :error? true}
                     (let [(ok r) (xpcall #(agent.execute-tool {: id : name : args : kind : title : mcp : status :locations (if loc-ok locations (json.array))}) (fn [e] e))]
                       (if ok (normalize-result r) {:content (oml.error-message r) :error? true})))]
      (session.emit! {:type :tool-end : id :content result.content :error? result.error?
                      :diff result.diff :terminal-id (. result :terminal-id) :exit result.exit
                      :meta result.meta})
      ;; What the transcript does not keep, for replays: the card's title and kind, and failure.
      (session.record! :tool {: id : name : title : kind :error? (= true result.error?)
                              :diff (replay-diff result.diff)})
      result)))

(fn agent.current-permission-mode [?session-id]
  "The permission mode of the session (the current one, or ?SESSION-ID): what its front end set,
else `agent.permission-mode`. Every front end and command asks this function."
  (or (session.get :permission-mode ?session-id) agent.permission-mode))

(fn agent.current-api [?session-id]
  "The wire protocol the next call of the session (the current one, or ?SESSION-ID) uses when
it has its own (/api): :chat, :anthropic, :responses, :gemini or :auto; nil leaves it to
`llm.api`. Every front end and command asks this function."
  (session.get :api ?session-id))

(fn agent.current-model [?session-id]
  "The model the next call of the session (the current one, or ?SESSION-ID) uses: its override
(/model, the editor's model picker), else `llm.model` (whose default is $OPENAI_MODEL); nil when
none is configured. Every front end and command asks this function."
  (or (session.get :model ?session-id) (oml.setting "llm.model")))

(fn resolved-call [call]
  ;; A file-changing call of oml's own (kind edit, delete or move, not an MCP server's) with
  ;; its `path` resolved once, links followed: the path the permission policy checks is the
  ;; path the tool writes, and the write follows no link that appears in between.
  (let [p (and (. {:edit true :delete true :move true} call.kind) (not call.mcp)
               (= :table (type call.args)) call.args.path)
        (ok abs) (if (= :string (type p)) (pcall session.resolve-path p) false)]
    (if (not ok) call
        (let [args (collect [k v (pairs call.args)] k v)
              resolved (collect [k v (pairs call)] k v)]
          (set args.path abs)
          (set resolved.args args)
          resolved))))

(fn agent.execute-tool [call]
  "Run the tool CALL {:id :name :args :kind}: \"Unknown tool: x\" for an unknown name, a
\"Blocked: reason\" error when the permission policy refuses it (or the failure of a change that
would fail), else (after `agent.on-tool-allowed`) the tool's result (a string, or {:content :error? :diff}). A
file-changing call's `path` is resolved first (`session.resolve-path`, links followed), and both
the permission check and the tool get that path. PreToolUse hooks run before the permission
check (`agent.pre-tool-hooks`: they may block the call, change its arguments, allow or ask), and
PostToolUse or PostToolUseFailure hooks after the tool (`agent.post-tool-hooks`). May throw; `agent.run-tool-call` turns that into an error result. Redefine or advise this
to change the permission policy or rewrite results."
  (let [entry (agent.find-tool call.name)
        (hooked refused) (if entry (agent.pre-tool-hooks call) call)
        call (when hooked (resolved-call hooked))]
    (if (not entry)
        {:content (.. "Unknown tool: " call.name) :error? true}
        refused refused
        (let [blocked (agent.check-permission call)]
          (if (= :table (type blocked)) blocked
              blocked {:content (.. "Blocked: " blocked) :error? true}
              (do (agent.on-tool-allowed call)
                  (let [(ok r) (xpcall #(agent.with-checkpoint call #(entry.fn call.args)) (fn [e] e))]
                    (if ok (agent.post-tool-hooks call r)
                        (do (agent.post-tool-hooks call {:content (oml.error-message r) :error? true})
                            (error r 0))))))))))

(fn agent.tool-result-message [call result]
  "The transcript message for the tool CALL's RESULT: {:role \"tool\" :tool_call_id :content}."
  {:role :tool :tool_call_id call.id :content result.content})

(fn tool-calls-of [message]
  (let [calls (and (= :table (type message)) message.tool_calls)]
    (if (= :table (type calls)) calls [])))

(fn has-text? [message]
  (let [c (and (= :table (type message)) message.content)]
    (and (= :string (type c)) (not= c ""))))

(fn agent.stop-reason [{: turn : response}]
  "After model call number TURN and its tools: nil to go on, else why the loop stops —
:cancelled, then :end-turn (no tool calls; :max-tokens when the model hit its output limit,
:refusal when it declined), then :max-turns (the session's :max-turns, a sub-agent's, else
`agent.max-turns`)."
  (if (or response.cancelled (session.cancelled?)) :cancelled
      (= 0 (length (tool-calls-of response.message)))
      (case response.finish-reason :length :max-tokens :refusal :refusal _ :end-turn)
      (>= turn (or (tonumber (session.get :max-turns)) agent.max-turns)) :max-turns
      nil))

(fn agent.parallel-call? [call]
  "Whether the tool CALL may run at the same time as its neighbours that may too: a `task` call
(a sub-agent) not in the background."
  (let [fun (or call.function {})
        args (and (= fun.name :task) (parse-arguments fun.arguments))]
    (and (= :table (type args)) (not= true args.background))))

(fn run-one [call]
  (if (session.cancelled?)
      {:content "Cancelled before it ran." :error? true}
      (agent.run-tool-call call)))

(fn run-together [calls]
  "Run CALLS concurrently (`session.spawn`), `agent.max-parallel` at a time; their results in order."
  (let [width (math.max 1 (or (oml.setting "agent.max-parallel") 1))
        results []]
    (var i 1)
    (while (<= i (length calls))
      (let [handles (fcollect [j i (math.min (length calls) (+ i width -1))]
                      (let [call (. calls j)] (session.spawn #(run-one call))))]
        (each [_ h (ipairs handles)]
          (let [(ok r) (session.join h)]
            (table.insert results (if ok r {:content (oml.error-message r) :error? true}))))
        (set i (+ i width))))
    results))

(fn agent.run-tool-calls [calls]
  "Run the tool CALLS of one model answer and return their results in order: one after another,
except that neighbouring calls `agent.parallel-call?` accepts run at the same time
(`agent.max-parallel` at most). A call that would start after a cancel is not run."
  (let [results []]
    (var i 1)
    (while (<= i (length calls))
      (var j i)
      (while (and (< j (length calls)) (agent.parallel-call? (. calls i))
                  (agent.parallel-call? (. calls (+ j 1))))
        (set j (+ j 1)))
      (if (= i j)
          (table.insert results (run-one (. calls i)))
          (each [_ r (ipairs (run-together (fcollect [k i j] (. calls k))))]
            (table.insert results r)))
      (set i (+ j 1)))
    results))

(fn agent.run-model-call [turn]
  "Model call number TURN of this turn, with its tool calls: call the model with the whole
transcript, run its tool calls in order, append the reply and the results together. Returns
what `agent.stop-reason` says: nil to go on, else why the loop stops. A function of its own, so
that the reply (which can hold a whole file) is garbage once it returns."
  (let [_ (agent.take-posted!)
        _ (agent.maybe-compact!)
        response (agent.call-model-or-compact)
        message response.message
        calls (tool-calls-of message)
        out []]
    (record-thought! response)
    (when (or (has-text? message) (< 0 (length calls)))
      (table.insert out message))
    (local results (agent.run-tool-calls calls))
    (each [i call (ipairs calls)]
      (table.insert out (agent.tool-result-message call (. results i))))
    ;; A tool message carries text only: images a tool gave follow as a user message.
    (let [images (agent.tool-images-message results)]
      (when images
        ;; Read back, it says which user message carries the tools' images (the export).
        (session.record! :tool-images {:count (- (length images.content) 1)})
        (table.insert out images)))
    (when (< 0 (length out))
      (session.append-message! out))
    (agent.stop-reason {: turn : response})))

(fn agent.run []
  "The loop: `agent.run-model-call` for model call 1, 2, … until it says stop (or the session
is cancelled before a call starts, or a hook answered `continue: false`: `agent.hook-stopped?`);
when it would end its turn, a Stop hook may send it back to work (`agent.stop-hooks`). Returns
the stop reason."
  (var turn 0)
  (var stop nil)
  (var continues 0)
  (var hook-stopped false)
  (while (not stop)
    (set turn (+ turn 1))
    (set stop (if (session.cancelled?) :cancelled (agent.run-model-call turn)))
    (when (and (not stop) (agent.hook-stopped?))
      (set hook-stopped true)
      (set stop :end-turn))
    (when (and (= stop :end-turn) (not hook-stopped) (agent.stop-hooks continues))
      (set continues (+ continues 1))
      (set stop nil)))
  stop)

(fn agent.parse-prompt [text]
  "{:command name :input rest} when TEXT is /name for a known command, else {:text TEXT}."
  (let [(name input) (text:match "^%s*/(%S+)%s*(.*)$")]
    (if (and name (agent.find-command name))
        {:command name :input (trim input)}
        {: text})))

(fn show-value [v]
  (if (= nil v) "" (= :string (type v)) v (fennel.view v)))

(fn agent.run-command [name input]
  "Run the command NAME with INPUT and show what it printed, then its value (strings as they
are, other values with fennel.view, nil omitted); an error shows \"Error in /name: msg\"."
  (let [entry (agent.find-command name)
        (ok v out) (capture #(entry.fn input))
        text (if ok
                 (.. out (show-value v))
                 (.. out "Error in /" name ": " (oml.error-message v)))]
    (when (text:find "%S")
      (session.say text))
    ;; Not a message of the transcript; kept for replays.
    (session.record! :command {: name : input :output text})
    nil))

(fn agent.prompt [text ?parts]
  "One user prompt: run it as a slash command when it names one (a markdown command's prompt goes on
as the prompt, after a `command` entry keeping it as typed, for replays), else mark it
(`session.mark-prompt!`, the point /rewind and /fork count) unless a hook blocks it
(`agent.prompt-hooks`: SessionStart and UserPromptSubmit, whose context joins the transcript
around the prompt), append what was posted to the
session meanwhile (`agent.take-posted!`) and then the prompt to the transcript (with ?PARTS, the
prompt's images as content parts, see `agent.user-content`) and run the loop. Returns
{:stop-reason :command}."
  (let [parsed (agent.parse-prompt text)
        entry (and parsed.command (agent.find-command parsed.command))
        ;; A markdown command's file, its arguments put in, is the prompt.
        prompt (if (and entry entry.file) (entry.fn parsed.input) text)]
    (if (and parsed.command (not (and entry entry.file)))
        (do (agent.run-command parsed.command parsed.input)
            {:stop-reason :end-turn :command parsed.command})
        (let [hooked (agent.prompt-hooks prompt)]
          (if hooked.blocked
              (do (session.emit! {:type :notice :text (.. "The prompt was blocked by a hook: " hooked.blocked)})
                  {:stop-reason :end-turn :blocked hooked.blocked})
              (do (session.mark-prompt! text)
                  ;; What was posted while the session was idle (a background task's result) comes
                  ;; before the prompt, in the order it happened.
                  (agent.take-posted!)
                  (when hooked.before (session.append-message! hooked.before))
                  ;; Just before the message it expanded to: what reads the file takes the next
                  ;; user message for the expansion.
                  (when parsed.command (session.record! :command {:name parsed.command :input parsed.input :expanded true}))
                  (session.append-message! {:role :user :content (agent.user-content prompt ?parts)})
                  (when hooked.after (session.append-message! hooked.after))
                  {:stop-reason (agent.run)}))))))

;;; Primitives built on the loop

(fn session.say [...]
  "Show the arguments, concatenated, as text in the current session."
  (session.emit! {:type :text-delta
                  :text (table.concat (icollect [_ v (ipairs (table.pack ...))] (tostring v)))}))

(fn session.with [id f ...]
  "Call F with the session ID current (for code outside a prompt: the REPL, timers)."
  (let [prev (session.bind! id)
        res (table.pack (xpcall f (fn [e] e) ...))]
    (session.bind! prev)
    (if (. res 1)
        (table.unpack res 2 res.n)
        (error (. res 2) 0))))

(fn agent.call-tool [tool args ?opts]
  "Call the tool TOOL (a name) with ARGS as if the model had: it shows a tool card and goes
through `agent.execute-tool` (so policy and advice apply). With {:record true} the call and its
result are appended to the transcript as a valid pair. Returns {:content :error?}."
  (let [name (tostring tool)
        id (.. "call_" (string.format "%08x%08x%08x" (math.random 0 0x7fffffff)
                                      (math.random 0 0x7fffffff) (math.random 0 0x7fffffff)))
        call {: id :type :function :function {: name :arguments (json.encode (or args {}))}}
        result (agent.run-tool-call call)]
    (when (and ?opts ?opts.record)
      (session.append-message! [{:role :assistant :content json.null :tool_calls [call]}
                                (agent.tool-result-message call result)]))
    result))

(fn agent.complete [prompt ?opts]
  "One silent, tool-less model call through `agent.call-model`: PROMPT is a string or a list of
messages; ?opts {:system :model}. Returns the text; throws \"Cancelled\" when the prompt was
cancelled. The transcript is not touched."
  (let [opts (or ?opts {})
        msgs [{:role :system :content (or opts.system (agent.system-prompt))}]]
    (if (= :string (type prompt))
        (table.insert msgs {:role :user :content prompt})
        (each [_ m (ipairs prompt)] (table.insert msgs m)))
    (let [response (agent.call-model {:messages msgs :tools (json.array) :model opts.model :silent? true})]
      (when response.cancelled (error "Cancelled" 0))
      (or response.text ""))))
