;; Hooks: Claude Code's and Codex's hook events at the loop's named steps, run from the
;; settings files users already have (`hook.settings`, run by `hook.run`, both in
;; src/bind/hooks.rs) and from Lisp (`hook.add`), their answers combined into one decision.
;;
;; Where each event fires: `agent.prompt` (SessionStart, UserPromptSubmit), `agent.execute-tool`
;; (PreToolUse, PostToolUse, PostToolUseFailure), `agent.check-permission`'s question
;; (PermissionRequest, Notification), `agent.run` (Stop, SubagentStop), `agent.task-run-start`
;; (SubagentStart), `agent.compact!` (PreCompact), and the session's end (SessionEnd, from
;; src/agent/delegate.rs). This file knows the events, matchers and decisions; it runs nothing
;; itself. Loaded after agent.fnl, permission.fnl and task.fnl.

(local agent _G.agent)
(local session _G.session)
(local hook _G.hook)
(local commands _G.commands)
(local oml _G.oml)

(defsetting hook.enabled? true :boolean
  "Whether hooks run at all: those of the settings files and those of `hook.add`.")
(defsetting hook.settings-files? true :boolean
  "Whether the hooks of Claude Code's and Codex's settings files run (`hook.settings`); `hook.add`'s run either way.")
(defsetting hook.max-stop-continues 8 :integer
  "How many times in one prompt a Stop hook may send the agent back to work (`decision: block`, exit 2) before its answer is ignored.")

;;; The events

;; Each event oml has a moment for, with that moment; any other event a settings file names is
;; listed by /hooks as unsupported.
(set hook.events
     {:SessionStart "before the first prompt of a session runs (source startup, or resume for a stored one)"
      :UserPromptSubmit "when a prompt is submitted, before the model sees it"
      :PreToolUse "before a tool runs, before the permission check"
      :PermissionRequest "when the permission policy would ask the user"
      :PostToolUse "after a tool ran and succeeded"
      :PostToolUseFailure "after a tool ran and failed"
      :Stop "when the agent would end its turn"
      :SubagentStart "when a sub-agent (the task tool) starts"
      :SubagentStop "when a sub-agent would end its turn"
      :PreCompact "before the transcript is compacted (trigger manual or auto)"
      :SessionEnd "when a session is closed"
      :Notification "when oml is about to ask the user for permission"})

;; Events whose Lisp hook fails closed: an error there blocks what the event is about.
(local fails-closed {:PreToolUse true :UserPromptSubmit true :PermissionRequest true})

;; oml's tools under Claude Code's names, with their arguments' names in Claude's input.
(set hook.claude-tools
     {:bash {:name :Bash :args {}}
      :read {:name :Read :args {:path :file_path}}
      :write {:name :Write :args {:path :file_path}}
      :edit {:name :Edit :args {:path :file_path :old_text :old_string :new_text :new_string}}
      :grep {:name :Grep :args {}}
      :find {:name :Glob :args {}}
      :ls {:name :LS :args {}}
      :task {:name :Task :args {:agent :subagent_type}}})

(fn hook.tool-name [name]
  "The name of oml's tool NAME as Claude Code's hooks know it (`bash` → `Bash`, `find` → `Glob`,
`mcp__server__tool` as is); a tool Claude has no name for keeps its own."
  (let [t (. hook.claude-tools name)] (if t t.name name)))

(fn hook.tool-input [name args]
  "ARGS of oml's tool NAME as a hook's `tool_input`: Claude Code's argument names added beside
oml's (`path` also as `file_path`, made absolute; `old_text` as `old_string`)."
  (let [t (. hook.claude-tools name)
        input (collect [k v (pairs (or args {}))] k v)]
    (each [own claude (pairs (if t t.args {}))]
      (when (not= nil (. input own))
        (tset input claude (if (= own :path)
                               (let [(ok abs) (pcall session.resolve-path (. input own))] (if ok abs (. input own)))
                               (. input own)))))
    input))

(fn hook.tool-args [name input]
  "A hook's `updatedInput` INPUT for oml's tool NAME as that tool's arguments: Claude Code's
names turned back into oml's."
  (let [t (. hook.claude-tools name)
        args (collect [k v (pairs input)] k v)]
    (each [own claude (pairs (if t t.args {}))]
      (when (not= nil (. input claude))
        (tset args own (. input claude))
        (tset args claude nil)))
    args))

(fn claude-mode [mode]
  (case mode :ask :default :accept-edits :acceptEdits :yolo :bypassPermissions :read-only :plan
    other other))

(fn hook.input [event ?extra ?session-id]
  "The JSON input of EVENT for the session (the current one, or ?SESSION-ID): `session_id`,
`transcript_path`, `cwd`, `hook_event_name` and `permission_mode` (Claude Code's names:
default, acceptEdits, bypassPermissions, plan), with ?EXTRA's fields (?EXTRA may be a function
giving them, called only here)."
  (let [sid (or ?session-id (session.current))
        extra (if (= :function (type ?extra)) (?extra) ?extra)
        input {:session_id sid :hook_event_name event
               :cwd (session.cwd sid)
               :transcript_path (hook.transcript-path sid)
               :permission_mode (claude-mode (agent.current-permission-mode sid))}]
    (each [k v (pairs (or extra {}))] (tset input k v))
    input))

;;; Hooks in Lisp

(set hook.lisp-hooks (or hook.lisp-hooks []))

(fn source-of [f]
  (let [info (debug.getinfo f :S)]
    (if info (.. info.short_src ":" (or info.linedefined "?")) "?")))

(fn hook.add [event matcher f ?name]
  "Run F (a function of the event's input table) at EVENT (a key of `hook.events`) when
MATCHER (Claude Code's: a regular expression on the tool's name, oml's or Claude's; nil or \"*\"
for every one) matches. F returns nil, or an answer in Claude Code's JSON output shape
({:decision :block :reason …}, {:hookSpecificOutput {:permissionDecision :deny …}}; the fields of
hookSpecificOutput may also stand at the top). In process, no fork. An error in F blocks a
PreToolUse, UserPromptSubmit or PermissionRequest (fails closed); elsewhere it is shown. A hook
of the same ?NAME is replaced. Returns the name."
  (assert (. hook.events event) (.. "hook.add: unknown event " (tostring event)))
  (assert (= :function (type f)) "hook.add: F must be a function")
  (let [name (or ?name (.. event "#" (+ 1 (length hook.lisp-hooks))))]
    (hook.remove name)
    (table.insert hook.lisp-hooks {: event : matcher :fn f : name :source (source-of f)})
    name))

(fn hook.remove [name]
  "Remove the Lisp hook NAME (`hook.add`'s answer). Returns whether there was one."
  (var found false)
  (for [i (length hook.lisp-hooks) 1 -1]
    (when (= name (. hook.lisp-hooks i :name))
      (table.remove hook.lisp-hooks i)
      (set found true)))
  found)

;;; Firing

(fn matches? [matcher names]
  (accumulate [yes false _ n (ipairs names) &until yes]
    (hook.matches? matcher n)))

(fn hook.handlers [event ?subjects ?session-id ?dir]
  "The hooks EVENT runs now for the session (the current one, or ?SESSION-ID; or for the
directory ?DIR), whose matchers match one of ?SUBJECTS (tool names): {:commands [{:handler
:group}] :lisp [hook]}."
  (let [out {:commands [] :lisp []}
        subjects (or ?subjects [])
        match? #(or (= 0 (length subjects)) (matches? $1 subjects))]
    (when (oml.setting "hook.settings-files?")
      (each [_ g (ipairs (. (hook.settings (or ?dir (session.cwd ?session-id))) :groups))]
        (when (and (= g.event event) (not g.skipped) (match? g.matcher))
          (each [_ h (ipairs g.handlers)]
            (table.insert out.commands {:handler h :group g})))))
    (each [_ h (ipairs hook.lisp-hooks)]
      (when (and (= h.event event) (match? h.matcher))
        (table.insert out.lisp h)))
    out))

(local rank {:allow 1 :ask 2 :deny 3})

(fn decide! [result decision why]
  ;; Deny beats ask beats allow; defer says nothing.
  (when (and (. rank decision) (> (. rank decision) (or (. rank result.decision) 0)))
    (set result.decision decision))
  (when (and (. rank decision) why) (table.insert result.reasons why)))

(fn apply-answer! [result answer project?]
  "Fold ANSWER (Claude Code's JSON output as a table) into RESULT. A project's hook may deny or
ask, never allow; its `updatedInput` is marked (:project-input?)."
  (let [specific (or answer.hookSpecificOutput answer)
        decision (or specific.permissionDecision (and (= answer.decision :approve) :allow))
        request (and (= :table (type specific.decision)) specific.decision)]
    (when (= answer.continue false)
      (set result.stop? true)
      (set result.stop-reason (or answer.stopReason result.stop-reason)))
    (when answer.systemMessage (table.insert result.messages answer.systemMessage))
    (when (= answer.decision :block)
      (set result.block? true)
      (table.insert result.blocks (or answer.reason "blocked by a hook")))
    (let [decision (if request (case request.behavior :allow :allow :deny :deny) decision)
          why (or specific.permissionDecisionReason (and request request.message) answer.reason)]
      (if (and project? (= decision :allow))
          (table.insert result.messages "a project's hook may not allow a tool call; its allow was ignored")
          (decide! result decision why)))
    (let [updated (or specific.updatedInput (and request request.updatedInput))]
      (when (= :table (type updated))
        (set result.updated-input updated)
        ;; The call it rewrote is not the one any hook's allow was given.
        (when project? (set result.project-input? true))))
    (when (= :string (type specific.additionalContext))
      (table.insert result.context specific.additionalContext))))

(fn text-context? [event] (or (= event :SessionStart) (= event :UserPromptSubmit)))

(fn command-label [c]
  (.. "`" (tostring (or c.handler.command c.handler.url c.handler.kind)) "` (" c.group.source ")"))

(fn apply-run! [result event c run]
  "Fold the RUN of command hook C into RESULT: exit 2 blocks with stderr, another failure is
shown, stdout is the JSON answer or (for SessionStart and UserPromptSubmit) context."
  (let [project? (= true (. c.group :project?))
        trim #(or (: (or $1 "") :match "^%s*(.-)%s*$") "")]
    (if (and (= run.end :exited) (= run.exit 0))
        (if run.output (apply-answer! result run.output project?)
            run.invalid (table.insert result.errors (.. "hook " (command-label c) ": " run.invalid))
            (and (text-context? event) (: (trim run.stdout) :find "%S"))
            (table.insert result.context (trim run.stdout)))
        (and (= run.end :exited) (= run.exit 2))
        (do (set result.block? true)
            (table.insert result.blocks (let [e (trim run.stderr)] (if (e:find "%S") e (.. "blocked by the hook " (command-label c))))))
        (table.insert result.errors
                      (.. "hook " (command-label c) " "
                          (case run.end
                            :exited (.. "exited with status " run.exit)
                            :timed-out "timed out"
                            :cancelled "was cancelled"
                            _ (.. "failed: " (tostring run.why)))
                          (let [e (trim run.stderr)] (if (e:find "%S") (.. ": " e) "")))))))

(fn run-lisp! [result event h input]
  (let [(ok answer) (xpcall h.fn (fn [e] e) input)]
    (if (not ok)
        (let [msg (.. "the Lisp hook " h.name " (" h.source ") failed: " (oml.error-message answer))]
          (if (. fails-closed event)
              (do (set result.block? true) (table.insert result.blocks msg))
              (table.insert result.errors msg)))
        (= :table (type answer)) (apply-answer! result answer false)
        (= :string (type answer)) (when (text-context? event) (table.insert result.context answer)))))

(fn hook.fire [event ?extra ?subjects ?session-id]
  "Run EVENT's hooks (`hook.handlers`: Lisp ones in order, then the settings files' all at once)
with the input `hook.input` makes of ?EXTRA (a table, or a function giving one: called only when
a hook runs), and combine their answers: {:block? :blocks
:decision :reasons :updated-input :project-input? :context :stop? :stop-reason :messages :errors
:ran}. :decision is :deny, :ask or :allow (deny beats ask beats allow); :project-input? says a
project's hook gave :updated-input. Messages and errors are shown to the
user as notices."
  (let [result {:block? false :blocks [] :reasons [] :context [] :messages [] :errors [] :ran 0}]
    (when (oml.setting "hook.enabled?")
      (let [found (hook.handlers event ?subjects ?session-id)]
        (when (< 0 (+ (length found.commands) (length found.lisp)))
          (let [input (hook.input event ?extra ?session-id)]
            (each [_ h (ipairs found.lisp)] (run-lisp! result event h input))
            (when (< 0 (length found.commands))
              (let [env {:CLAUDE_PROJECT_DIR (agent.hook-project-dir ?session-id)
                         :OML_PROJECT_DIR (agent.hook-project-dir ?session-id)}
                    runs (hook.run (icollect [_ c (ipairs found.commands)] c.handler)
                                   input (session.cwd ?session-id) env)]
                (each [i c (ipairs found.commands)] (apply-run! result event c (. runs i)))))
            (set result.ran (+ (length found.commands) (length found.lisp)))
            (when result.stop?
              (agent.hook-stop! (or result.stop-reason (.. "a " event " hook stopped the agent")) ?session-id))
            (each [_ m (ipairs result.messages)] (session.emit! {:type :notice :text m} ?session-id))
            (each [_ m (ipairs result.errors)] (session.emit! {:type :notice :text m} ?session-id))))))
    result))

(fn agent.hook-project-dir [?session-id]
  "The project directory hooks are given as CLAUDE_PROJECT_DIR and OML_PROJECT_DIR: the
session's project root, else its directory."
  (let [cwd (session.cwd ?session-id)]
    (or (_G.project.root cwd) cwd)))

(fn hook.context-message [event texts]
  "The user message that gives the model the context hooks of EVENT added (TEXTS), or nil."
  (when (< 0 (length texts))
    {:role :user :content (.. "<hook-context event=\"" event "\">\n" (table.concat texts "\n\n")
                              "\n</hook-context>")}))

(fn hook.reason [result]
  "Why the hooks' RESULT blocked: its block reasons, then its decision reasons, joined."
  (let [all (icollect [_ r (ipairs result.blocks) &into []] r)]
    (each [_ r (ipairs result.reasons)] (table.insert all r))
    (if (< 0 (length all)) (table.concat all "; ") "a hook refused it")))

;;; Listing

(fn handler-text [h]
  (case h.type
    :command (.. "command `" h.command "`" (if h.timeout (.. " (timeout " h.timeout " s)") ""))
    :http (.. "http " h.url)
    _ (.. h.kind " (oml does not run this type)")))

(fn hook.describe [?dir]
  "The hooks for a session in ?DIR (default: the current session's) as lines of text: each
settings-file hook with its file and place, each Lisp hook with its source, and why any of
them does not run (an untrusted project, an event oml has no moment for, a handler type oml
does not run, a bad matcher), then the files' problems."
  (let [dir (or ?dir (session.cwd))
        s (hook.settings dir)
        lines []
        off (if (not (oml.setting "hook.enabled?")) " (not run: hook.enabled? is false)"
                (not (oml.setting "hook.settings-files?")) " (not run: hook.settings-files? is false)"
                "")]
    (each [_ g (ipairs s.groups)]
      ;; The matcher is compiled only for a group that could run: an untrusted project's are
      ;; data, and may be costly ones.
      (let [why (or (and (not (. hook.events g.event)) "unsupported: oml has no moment for this event")
                    g.skipped
                    (let [(_ bad) (hook.matches? g.matcher "")] bad))]
        (each [_ h (ipairs g.handlers)]
          (table.insert lines (.. "- " g.event (if g.matcher (.. " " g.matcher) "") ": " (handler-text h)
                                  "  [" g.source " " g.place "]" off
                                  (if why (.. "\n    not run: " why) ""))))))
    (each [_ h (ipairs hook.lisp-hooks)]
      (table.insert lines (.. "- " h.event (if h.matcher (.. " " h.matcher) "") ": Lisp " h.name "  [" h.source "]"
                              (if (oml.setting "hook.enabled?") "" " (not run: hook.enabled? is false)"))))
    (each [_ f (ipairs s.files)]
      (when f.problem (table.insert lines (.. "! " f.path ": " f.problem))))
    (each [_ p (ipairs s.problems)]
      (table.insert lines (.. "! " p.source ": " p.message)))
    lines))

(fn commands.hooks [input]
  {:fnl/docstring "List the hooks that run at the loop's events: those of Claude Code's and Codex's settings files and of `hook.add`, with their source, and why any does not run."}
  (let [lines (hook.describe)]
    (if (= 0 (length lines))
        "No hooks. Add them to ~/.claude/settings.json, the project's .claude/settings.json, ~/.codex/hooks.json, or with (hook.add …) in an init file."
        (.. "Hooks:\n" (table.concat lines "\n")))))
