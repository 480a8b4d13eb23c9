;; Sub-agents: the `task` tool, which runs a sub-agent (a definition found by `agent.find-agent`,
;; or a built-in one) as a session of this process to the end of its own turn and hands its
;; final message back; in the background (`task_output`, `task_stop`, `/tasks`); in a git
;; worktree of its own. Several `task` calls of one model answer run in parallel
;; (`agent.run-tool-calls`, `agent.max-parallel`), and nesting stops at `agent.max-depth`.
;;
;; A sub-agent's session keeps its link in session keys: :subagent {:parent :call :agent :depth}
;; (what `agent.ask-about` asks through, in the parent's session and card), :agent-prompt (its
;; system prompt), :tool-filter {:allow :deny}, :max-turns. The Rust primitives are in
;; src/agent/subagent.rs (`session.new-child`, `session.start-turn`, `session.next-event`,
;; `session.wait-turn`, `session.stop-turn`, `session.spawn`, `session.join`). Loaded after
;; delegate.fnl, whose `agent.delegate` drives a definition that names an ACP agent.

(local oml _G.oml)
(local fennel (require :fennel))
(local agent _G.agent)
(local tools _G.tools)
(local commands _G.commands)
(local session _G.session)
(local project _G.project)
(local json _G.json)
(local skill _G.skill)

(defsetting agent.max-parallel 4 :integer
  "Sub-agents (`task` calls of one model answer) that run at the same time at most; the others wait for a free place.")
(defsetting agent.max-depth 3 :integer
  "How deep sub-agents nest: a sub-agent at this depth gets an error result from `task`.")
(defsetting agent.task-max-chars 50000 :integer
  "Characters of a sub-agent's final message the `task` tool returns at most; the head is kept and a footer says how much was cut.")

;; Lines of a task card's live view: the sub-agent's tool calls kept at most, and characters of
;; its text since the last one.
(local view-max-tools 30)
(local view-max-text 2000)

;;; Built-in definitions

(set agent.builtin-agents
     {:general-purpose {:name :general-purpose :source "built in"
                        :description "A general agent for multi-step tasks: searching, reading, changing files and running commands."
                        :prompt "You are a sub-agent of oml, a coding agent. Do the task you are given completely, with your tools, then answer with a concise report of what you did and found: the parent agent reads only your final message."}
      :explore {:name :explore :source "built in"
                :description "A fast read-only agent for finding files, searching code and answering questions about the codebase."
                :tools [:read :grep :find :ls]
                :prompt "You are a read-only search sub-agent of oml. Find what you are asked for with read, grep, find and ls, then answer with the paths (as path:line) and a concise summary: the parent agent reads only your final message."}})

(fn agent.task-agent [name]
  "The definition the `task` tool runs for NAME: `agent.find-agent`'s (the user's and the
project's definitions and `agent.def`), else a built-in one (`agent.builtin-agents`), else nil."
  (or (agent.find-agent name) (. agent.builtin-agents name)))

(fn task-agents []
  "The definitions the `task` tool runs now, by name: the built-in ones under those found."
  (let [by-name (collect [n d (pairs agent.builtin-agents)] n d)
        (ok defs) (pcall agent.agent-defs)]
    (when (and ok (= :table (type defs)))
      (each [_ d (ipairs (or defs.found []))] (tset by-name d.name d)))
    by-name))

(fn agent.task-agent-names []
  "The names the `task` tool accepts now, sorted: the definitions found and the built-in ones."
  (doto (icollect [n (pairs (task-agents))] n) (table.sort)))

;;; The sub-agent's session

(fn agent.depth [?session-id]
  "How deep the session (the current one, or ?SESSION-ID) is nested: 0 for a user's session, 1
for its sub-agents, and so on."
  (let [link (session.get :subagent ?session-id)]
    (or (and (= :table (type link)) (tonumber link.depth)) 0)))

(fn agent.task-grants [def]
  "What the sub-agent of DEF may do under this session: {:permission-mode :refused
:mcp-servers :sandbox-mode}, by `agent.granted` (the trust rule for definitions: never above
this session's permission mode nor its own sandbox mode, a sub-agent's)."
  (let [parent (agent.current-permission-mode)
        g (agent.granted def parent (project.trusted? (session.cwd)) (session.get :sandbox-mode))]
    {:permission-mode (or g.permission-mode parent) :refused (or g.refused [])
     :mcp-servers g.mcp-servers :sandbox-mode g.sandbox-mode}))

(fn agent.task-mcp! [child servers]
  "Give the sub-agent's session CHILD the MCP servers its grants name: SERVERS nil shares this
session's; an empty list gives it none; names only share this session's, holding its tools to
those servers; any server with a :command or :url of its own starts a set of its own
(`mcp.start-own`) with those and the named ones `mcp.server-specs` declares."
  (let [parent (or (session.get :mcp-session) (session.current))
        own (icollect [_ s (ipairs (or servers []))] (when (or s.command s.url) s))
        names (icollect [_ s (ipairs (or servers []))] (when (not (or s.command s.url)) s.name))]
    (if (= nil servers) (session.put! :mcp-session parent child)
        (= 0 (length servers)) nil
        (= 0 (length own)) (do (session.put! :mcp-session parent child)
                               (session.put! :mcp-servers names child))
        (let [declared (or (_G.mcp.server-specs (session.cwd child)) {})
              specs (collect [_ n (ipairs names)] (values n (. declared n)))]
          (each [_ s (ipairs own)]
            (tset specs s.name (collect [k v (pairs s)] (when (not= k :name) (values k v)))))
          (_G.mcp.start-own child specs)))))

(fn agent.task-prompt [def refused]
  "The system prompt of a sub-agent of DEF: its definition's prompt, then the instructions of the
skills it names (`skills`), loaded as the `skill` tool loads them; a skill that is not found is
added to REFUSED."
  (let [parts [(or def.prompt "")]]
    (each [_ name (ipairs (or def.skills []))]
      (if (skill.find name)
          (table.insert parts (.. "## Skill " name "\n" (tools.skill {: name})))
          (table.insert refused (.. "no skill " name " to load"))))
    (when (. def :reasoning-effort)
      (table.insert refused (.. "reasoning effort " (tostring (. def :reasoning-effort))
                                ": oml sets none per sub-agent")))
    (table.concat parts "\n\n")))

(fn agent.task-session [def cwd call-id]
  "A new session for a sub-agent of DEF working in CWD for the `task` call CALL-ID of this
session: its mode (`agent.task-grants`), model, system prompt, tools, turn limit and link, and
this session's additional directories, network choice and MCP servers. Returns its id and the
grants."
  (let [parent (session.current)
        grants (agent.task-grants def)
        child (session.new-child cwd)]
    ;; First, so that the session lists leave the sub-agent's session out (store.rs).
    (session.record! :subagent-of {:session parent :agent def.name :call call-id} child)
    (each [k v (pairs {:permission-mode grants.permission-mode
                       :model (when (and def.model (not= def.model :inherit)) def.model)
                       :agent-prompt (agent.task-prompt def grants.refused)
                       :tool-filter {:allow def.tools
                                     ;; A sub-agent asks the user nothing but permissions.
                                     :deny (icollect [_ n (ipairs (or (. def :disallowed-tools) [])) &into [:ask_user]] n)}
                       :max-turns (. def :max-turns)
                       :additional-directories (session.get :additional-directories)
                       :network? (session.get :network?)
                       :sandbox-mode (or grants.sandbox-mode (session.get :sandbox-mode))
                       :subagent {: parent :call call-id :agent def.name
                                  :depth (+ 1 (agent.depth))}})]
      (when (not= nil v) (session.put! k v child)))
    (agent.task-mcp! child grants.mcp-servers)
    (session.record! :subagent {:session child :agent def.name :call call-id})
    (values child grants)))

;;; Asking the user for a sub-agent

(fn alive? [id]
  (accumulate [hit false _ s (ipairs (session.list)) &until hit] (= s id)))

(fn agent.ask-about [call]
  "Ask the user about the tool CALL through the front end (`agent.ask-permission`); in a
sub-agent's session, in its parent's session instead (up to the user's), on the card of the
`task` call that runs it, the title naming the sub-agent. Returns what `agent.ask-permission`
does."
  (let [link (session.get :subagent)]
    (if (and (= :table (type link)) link.parent (alive? link.parent))
        (let [asked (collect [k v (pairs call)] k v)]
          (set asked.id link.call)
          (set asked.title (.. link.agent ": " (or call.title call.name)))
          (set asked.status :in_progress)
          (session.with link.parent agent.ask-about asked))
        (agent.ask-permission call))))

;;; Running one

(fn new-view [name prompt]
  "The task card's live view of a sub-agent's turn: its name and prompt, one line per tool call,
and its text since the last one."
  (let [calls [] by-id {}]
    (var text "")
    {:event (fn [e]
              (case e.type
                :text-delta (do (set text (.. text e.text))
                                (when (> (length text) (* 8 view-max-text))
                                  (set text (oml.keep-tail text view-max-text))))
                :tool-start (let [c {:title (if (and (= :string (type e.title)) (e.title:find "%S")) e.title e.name)
                                     :status "…"}]
                              (set text "")
                              (tset by-id e.id c)
                              (table.insert calls c)
                              (when (> (length calls) view-max-tools) (table.remove calls 1)))
                :tool-end (let [c (. by-id e.id)]
                            (when c (set c.status (if (. e :error?) "failed" "done"))))))
     :text (fn []
             (let [out [(.. "**" name "**: " (oml.keep-tail prompt 300))]]
               (each [_ c (ipairs calls)]
                 (table.insert out (.. "- " c.title " (" c.status ")")))
               (when (text:find "%S") (table.insert out (oml.keep-tail text view-max-text)))
               (table.concat out "\n")))}))

(fn final-message [child]
  "The text of the last assistant message of the session CHILD's transcript, or \"\"."
  (let [msgs (session.transcript child)]
    (var found "")
    (for [i (length msgs) 1 -1 &until (not= found "")]
      (let [m (. msgs i)]
        (when (and (= m.role :assistant) (= :string (type m.content)) (m.content:find "%S"))
          (set found m.content))))
    found))

(fn agent.task-result [run]
  "The `task` tool's result for the finished RUN {:name :child :ended :worktree :refused}: the
sub-agent's final message (cut to `agent.task-max-chars`), then a footer with how it stopped,
and for a worktree its branch, folder and diff stat. {:content :error? :meta}."
  (let [ended (or run.ended {:error "the turn left no result"})
        text (final-message run.child)
        footer [(.. "[" run.name (if ended.error (.. " failed: " ended.error)
                                     (.. " stopped: " (tostring (. ended :stop-reason))))
                    "]")]]
    (each [_ r (ipairs (or run.refused []))] (table.insert footer (.. "[not granted: " r "]")))
    (when run.worktree
      (let [wt run.worktree
            (ok stat) (pcall project.worktree-diffstat wt.path wt.base)]
        (table.insert footer (.. "[worktree: branch " wt.branch " in " wt.path "]"))
        (table.insert footer (if (and ok (= :string (type stat)) (stat:find "%S"))
                                 (.. "Changes:\n" stat)
                                 "No changes."))))
    {:content (.. (oml.cap-head (if (text:find "%S") text "(no final message)")
                                (oml.setting "agent.task-max-chars"))
                  "\n\n" (table.concat footer "\n"))
     :error? (or (not= nil ended.error) (= (. ended :stop-reason) :cancelled))
     :meta {:oml {:subagent {:sessionId run.child :parentSessionId run.parent :agent run.name}}}}))

(fn agent.watch-task [run follow-cancel?]
  "Read the events of the sub-agent turn RUN {:handle :view :call-id} until it ends, showing
each on the task card; with FOLLOW-CANCEL? a cancel of this session's prompt cancels it. Sets
RUN's :ended."
  (var e (session.next-event run.handle follow-cancel?))
  (while e
    (run.view.event e)
    (when run.card-id
      (session.emit! {:type :tool-output :id run.card-id :text (run.view.text) :replace true}))
    (set e (session.next-event run.handle follow-cancel?)))
  (set run.ended (session.wait-turn run.handle))
  run)
;;; Background tasks

;; Every task of this process by id: {:id :name :description :parent :child :handle :view
;; :background? :ended :watcher :started}.
(set agent.tasks (or agent.tasks {}))
(var next-task 0)

(fn new-task-id []
  (set next-task (+ next-task 1))
  (.. "task-" next-task))

(defsetting agent.max-background 8 :integer
  "Background tasks (sub-agents and `bash` commands) one session may have running at once: one more is an error result the model reads.")

;; Background sub-agents being started by session id, not yet in `agent.tasks`.
(local reserved {})

(fn reserve! [n]
  (let [sid (session.current)]
    (tset reserved sid (let [v (+ (or (. reserved sid) 0) n)] (when (< 0 v) v)))))

(fn background-refusal []
  "An error result when this session already runs `agent.max-background` background tasks, else nil."
  (let [limit (oml.setting "agent.max-background")
        running (+ (length (agent.running-tasks)) (or (. reserved (session.current)) 0))]
    (when (>= running limit)
      {:content (.. "This session already runs " running " background tasks (agent.max-background is "
                    limit "): wait for one (task_output with wait) or stop one (task_stop) first.")
       :error? true})))

(defsetting agent.background-timeout 14400 :number
  "Seconds a command started with `bash`'s background argument may run; then it is killed.")

(fn command-result [run]
  (let [state (oml.bash-job run.job)
        r (or state.result {:content (.. "(still running)\n" state.output) :error? false})]
    {:content (.. "$ " run.command "\n" r.content) :error? r.error?}))

(fn agent.start-command [command ?timeout]
  "Start COMMAND in the background for the `bash` tool's background argument (`oml.bash-start`:
the same sandbox, not stopped with the prompt, killed after ?TIMEOUT seconds, default
`agent.background-timeout`): a task of this session that `task_output`, `task_stop` and `/tasks`
know, whose result joins the conversation when it ends. Returns the tool's result."
  (case (background-refusal)
    refused refused
    _ (agent.start-command* command ?timeout)))

(fn agent.start-command* [command ?timeout]
  "`agent.start-command` once the limit of background tasks has been checked."
  (let [id (new-task-id)
        run {: id :name :bash : command :description command :parent (session.current)
             :background? true :call-id (agent.running-call-id) :started (os.time)
             :job (oml.bash-start command (or ?timeout (oml.setting "agent.background-timeout"))
                                  _G.tools.bash-max-chars)}]
    (tset agent.tasks id run)
    (set run.card-id (.. (or run.call-id id) ":background"))
    (session.emit! {:type :tool-start :id run.card-id :name :bash :kind :execute
                    :title (.. command " (background " id ")") :args {: command :background true}})
    (set run.watcher (session.spawn (fn []
                                      (oml.bash-job-wait run.job)
                                      (set run.ended {:stop-reason :end-turn})
                                      (agent.task-finished! run)
                                      true)))
    {:content (.. "Started " id " in the background: `" command "`. task_output reads its output, task_stop ends it; its result joins the conversation when it ends.")}))

(fn agent.task-finished! [run]
  "Hand the result of the background task RUN, which has just ended, to its parent session: as
a user message posted to the session (`session.post!`), which joins the conversation before
the session's next model call; a front end that wakes an idle session for what is posted to it
(the chat, ACP v2) starts a turn with it."
  (let [(ok r) (pcall #(if run.job (command-result run) (agent.task-result run)))
        ;; The card completes and the child goes even when the result cannot be made.
        result (if ok r {:content (.. "[" run.name " failed: " (oml.error-message r) "]") :error? true})
        text (.. "[Background task " run.id " (" run.name (if run.description (.. ": " run.description) "")
                 ") has finished]\n" result.content)]
    (set run.result result)
    (session.emit! {:type :tool-end :id run.card-id :content result.content :error? result.error?
                    :meta result.meta})
    (when (alive? run.parent)
      (session.post! {:role :user :content text} run.parent))
    (when run.child (session.forget-child run.child))))

(fn start-background! [run]
  "Watch the background task RUN on a coroutine of its own, on a card of its own that completes
when it ends; returns at once."
  (set run.card-id (.. (or run.call-id run.id) ":background"))
  (session.emit! {:type :tool-start :id run.card-id :name :task :kind :other
                  :title (.. run.name " (background " run.id ")" (if run.description (.. ": " run.description) ""))
                  :args {:agent run.name :background true}})
  (set run.watcher (session.spawn (fn []
                                    (agent.watch-task run false)
                                    (agent.task-finished! run)
                                    true)))
  run)

;;; The tool

(fn task-error [text] {:content text :error? true})

(fn agent.task-worktree [name]
  "A git worktree of this session's directory for a sub-agent NAME (`project.worktree-add`):
{:path :branch :base :name}; raises a clear error outside a git repository."
  (project.worktree-add (session.cwd) name))

(fn agent.task-run-start [def id {: prompt : description : isolation : call-id : background?}]
  "Start the task ID, a sub-agent of DEF on PROMPT in a session of its own (in a worktree for
ISOLATION or DEF's :isolation \"worktree\"), and record it in `agent.tasks`: returns the run, or
the tool's error result when no worktree could be made."
  (let [(ok-wt wt) (if (or (= isolation :worktree) (= def.isolation :worktree))
                       (pcall agent.task-worktree (.. (tostring def.name) "-" id))
                       (values true nil))]
    (if (not ok-wt)
        (task-error (.. "No worktree for the task: " (oml.error-message wt)))
        (let [(child grants) (agent.task-session def (if wt wt.path (session.cwd)) call-id)
              run {: id :name def.name : description :parent (session.current) : child
                   :view (new-view def.name prompt) : background?
                   :worktree wt :refused grants.refused :call-id call-id :started (os.time)}]
          (tset agent.tasks id run)
          (set run.handle (session.start-turn child (agent.subagent-start-hooks child def prompt)))
          run))))

;; Characters of a task's description kept: it titles cards, `/tasks` lines and the message
;; that hands a background task's result over.
(local description-max-chars 120)

(fn short [text]
  "TEXT cut to `description-max-chars` characters (whole characters), with … when cut."
  (if (not= :string (type text)) nil
      (let [(ok cut) (pcall utf8.offset text (+ description-max-chars 1))]
        (if (and ok cut (<= cut (length text))) (.. (text:sub 1 (- cut 1)) "…") text))))

(fn agent.run-task [{: agent-name : prompt : description : background : isolation : call-id}]
  "Run the sub-agent AGENT-NAME on PROMPT for the `task` call CALL-ID of this session, as the
`task` tool describes; returns the tool's result. DESCRIPTION is cut to a title's length."
  (let [description (short description)
        def (agent.task-agent agent-name)
        depth (agent.depth)
        max-depth (oml.setting "agent.max-depth")]
    (if (not def)
        (task-error (.. "Unknown agent " (tostring agent-name) "; the agents are: "
                        (table.concat (agent.task-agent-names) ", ")))
        (>= depth max-depth)
        (task-error (.. "Sub-agents nest at most " max-depth " deep (agent.max-depth): do this task yourself."))
        def.acp
        (agent.run-acp-task def prompt)
        (and (or (= true background) (= true def.background)) (background-refusal))
        (background-refusal)
        (let [id (new-task-id)
              bg? (or (= true background) (= true def.background))
              ;; A background task holds its place from here: the worktree and the session's
              ;; MCP servers yield, and parallel `task` calls must not all pass the limit.
              _ (when bg? (reserve! 1))
              (ok-run run) (pcall agent.task-run-start def id {: prompt : description : isolation
                                                               : call-id :background? bg?})]
          (when bg? (reserve! -1))
          (if (not ok-run) (error run 0)
              (= nil run.handle) run
              (let [child run.child]
                (if run.background?
                    (do (start-background! run)
                        {:content (.. "Started background task " id " (" def.name "). Its result joins the conversation when it ends; task_output reads it before, task_stop ends it.")})
                    (do (set run.card-id call-id)
                        ;; The child's session goes however the watch ends (an interrupt too).
                        (let [(ok result) (pcall #(agent.task-result (agent.watch-task run true)))]
                          (when (not run.ended) (session.stop-turn run.handle))
                          (session.forget-child child)
                          (if ok (do (set run.result result) result)
                              (error result 0)))))))))))

(fn agent.run-acp-task [def prompt]
  "Run the definition DEF that names an ACP agent (:acp) on PROMPT through `agent.delegate`."
  (let [name (.. "task-" def.name)]
    ;; Defined again each time: the definition's file may have changed since.
    (do
      (agent.defdelegate name {:agent def.acp :model def.model
                               :system-prompt (when def.prompt (def.prompt:match "^%s*(.-)%s*$"))
                               :description def.description}))
    (let [(ok r) (pcall agent.delegate name prompt {})]
      (if (not ok)
          (task-error (.. "The agent " def.acp " failed: " (oml.error-message r)))
          {:content (.. (oml.cap-head (if (r.text:find "%S") r.text "(no answer text)")
                                      (oml.setting "agent.task-max-chars"))
                        "\n\n[" def.name " (" def.acp ") stopped: " r.stop-reason "]")
           :error? (= r.stop-reason :cancelled)}))))

(fn describe-agents []
  (let [by-name (task-agents)
        names (doto (icollect [n (pairs by-name)] n) (table.sort))]
    (table.concat
      (icollect [_ n (ipairs names)]
        (let [d (. by-name n)]
          (.. n (if d.description (.. " (" d.description ")") ""))))
      "; ")))

(fn tools.task [{:agent agent-name : prompt : description : background : isolation}]
  {:fnl/docstring "Run a sub-agent: it works on the task with its own context and tools, and only its final message comes back to you. Give it a complete, self-contained prompt; it sees nothing of this conversation. Several task calls in one answer run in parallel. With background true it runs while you go on: its result joins the conversation when it ends (task_output reads it before, task_stop ends it). With isolation \"worktree\" it works in a git worktree of its own, and you get its branch and changes."
   :kind :other :title "{agent}: {description}"
   :params {:agent [:string "Which sub-agent: one of the names listed in this description"]
            :prompt [:string "The task, complete and self-contained"]
            :description [:string "A short (3-5 words) description of the task" :optional]
            :background [:boolean "Run it in the background and go on" :optional]
            :isolation [:string "\"worktree\" to work in a git worktree of its own" :optional]}}
  (agent.run-task {: agent-name : prompt : description : background : isolation
                   :call-id (agent.running-call-id)}))

(fennel.metadata:set tools.task :describe
  #(.. (oml.doc-text (fennel.metadata:get tools.task :fnl/docstring))
       " The agents: " (describe-agents) "."))

(fn find-task [id]
  (let [run (. agent.tasks (tostring id))]
    (when (and run (= run.parent (session.current))) run)))

(fn status-of [run]
  (if (not run.ended) "running"
      run.ended.error (.. "failed: " run.ended.error)
      (tostring (. run.ended :stop-reason))))

(fn tools.task_output [{: id : wait}]
  {:fnl/docstring "Read a background task's state and, once it has ended, its result. With wait true, wait for it to end first."
   :kind :read :title "Output of {id}"
   :params {:id [:string "The task's id (task-N)"]
            :wait [:boolean "Wait for the task to end" :optional]}}
  (let [run (find-task id)]
    (if (not run) (task-error (.. "No task " (tostring id) " in this session"))
        (do (when (and (= true wait) run.watcher) (session.join run.watcher))
            (if run.result run.result
                run.job (command-result run)
                {:content (.. run.id " (" run.name ") is " (status-of run) ". So far:\n" (run.view.text))})))))

(fn tools.task_stop [{: id}]
  {:fnl/docstring "Stop a background task; its result (what it did so far) joins the conversation as it ends."
   :kind :other :title "Stop {id}"
   :params {:id [:string "The task's id (task-N)"]}}
  (let [run (find-task id)]
    (if (not run) (task-error (.. "No task " (tostring id) " in this session"))
        run.ended {:content (.. run.id " had already ended (" (status-of run) ").")}
        (do (if run.job (oml.bash-job-stop run.job) (session.stop-turn run.handle))
            {:content (.. "Stopping " run.id " (" run.name ").")}))))

(fn commands.tasks [input]
  {:fnl/docstring "List this session's sub-agent tasks and their state; `stop ID` stops a background one."
   :hint "[stop ID]"}
  (let [stop (input:match "^stop%s+(%S+)$")
        mine (icollect [_ run (pairs agent.tasks)] (when (= run.parent (session.current)) run))]
    (table.sort mine (fn [a b] (< (tonumber (a.id:match "%d+")) (tonumber (b.id:match "%d+")))))
    (if stop (. (tools.task_stop {:id stop}) :content)
        (= 0 (length mine)) "No tasks in this session."
        (table.concat (icollect [_ run (ipairs mine)]
                        (.. run.id "  " run.name (if run.background? " (background)" "") "  "
                            (status-of run) (if run.description (.. "  " run.description) "")))
                      "\n"))))

;;; Waking the parent

(fn agent.resume []
  "A turn with no prompt of its own, for a session woken by its background tasks: the loop
(`agent.run`), whose first model call takes what was posted to the session. Returns
{:stop-reason}."
  {:stop-reason (agent.run)})

(fn agent.running-tasks [?session-id]
  "The background tasks of the session (the current one, or ?SESSION-ID) still running."
  (let [sid (or ?session-id (session.current))]
    (icollect [_ run (pairs agent.tasks)]
      (when (and (= run.parent sid) run.background? (not run.result)) run))))

(fn agent.close-tasks [session-id]
  "Stop every task of the session SESSION-ID still running (it has been closed or forgotten):
its background commands and sub-agents, which would otherwise run on with no one to read them.
Called when a session leaves the registry (src/agent/delegate.rs); its tasks then leave
`agent.tasks`. Returns how many were running."
  (let [mine (icollect [id run (pairs agent.tasks)] (when (= run.parent session-id) id))
        running (icollect [_ id (ipairs mine)]
                  (let [run (. agent.tasks id)] (when (not run.ended) run)))]
    (each [_ run (ipairs running)]
      (if run.job (oml.bash-job-stop run.job)
          run.handle (session.stop-turn run.handle)))
    (each [_ id (ipairs mine)] (tset agent.tasks id nil))
    (length running)))

(fn agent.await-background [?session-id]
  "Wait until every background task of the session (the current one, or ?SESSION-ID) has ended
and handed its result over (posted it to the session); returns how many were still running."
  (let [waiting (agent.running-tasks ?session-id)]
    (each [_ run (ipairs waiting)]
      (when run.watcher (session.join run.watcher)))
    (length waiting)))
