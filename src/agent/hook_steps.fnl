;; What each step of the loop does with its hooks' answers (`hook.fire`, hooks.fnl): the
;; functions `agent.prompt`, `agent.execute-tool`, `agent.run`, `agent.check-permission`,
;; `agent.task-run-start` and `agent.compact!` call by name, so an init file can redefine or
;; advise any of them. With no hook for an event each costs one look at the cached settings.

(local agent _G.agent)
(local session _G.session)
(local hook _G.hook)
(local commands _G.commands)
(local oml _G.oml)

;; The sessions whose SessionStart fired, with what SessionEnd needs once they are gone.
(local started {})

(fn agent.session-start-hooks []
  "Fire SessionStart once per session of this process (source `resume` when the session
already has a transcript, else `startup`); returns the context message it adds, or nil."
  (let [sid (session.current)]
    (when (and sid (not (. started sid)))
      (tset started sid {:cwd (session.cwd) :transcript-path (hook.transcript-path sid)})
      (let [source (if (< 0 (length (session.transcript))) :resume :startup)
            r (hook.fire :SessionStart {: source} [source])]
        (hook.context-message :SessionStart r.context)))))

(fn agent.prompt-hooks [prompt]
  "The hooks of a prompt about to run (not of a sub-agent's): SessionStart, then
UserPromptSubmit with PROMPT. Returns {:blocked why :before msg :after msg}: :blocked when a hook
refused the prompt (it is not run and not kept), :before SessionStart's context, :after
UserPromptSubmit's."
  (if (session.get :subagent)
      {}
      (let [before (agent.session-start-hooks)
            r (hook.fire :UserPromptSubmit {: prompt})]
        (if (or r.block? r.stop?)
            {:_ (agent.hook-stopped?) ; taken: the prompt is not run at all
             :blocked (if r.block? (hook.reason r) (or r.stop-reason "a hook stopped the session"))
             : before}
            {: before :after (hook.context-message :UserPromptSubmit r.context)}))))

(fn tool-event [call extra]
  (let [input {:tool_name (hook.tool-name call.name)
               :tool_input (hook.tool-input call.name call.args)
               :tool_use_id call.id}]
    (each [k v (pairs (or extra {}))] (tset input k v))
    input))

(fn tool-names [call] [call.name (hook.tool-name call.name)])

(fn agent.pre-tool-hooks [call]
  "Fire PreToolUse for the tool CALL. Returns the call to run (its args replaced by a hook's
`updatedInput`; :hook-decision :allow or :ask and :hook-context set when hooks said so), or
nil and the blocked result {:content \"Blocked by a hook: …\" :error? true} when a hook blocked
it (exit 2, `permissionDecision: deny`, `continue: false`). When a project's hook rewrote the
arguments, no hook's allow holds (each was given the call before it): the permission mode decides."
  (let [r (hook.fire :PreToolUse #(tool-event call) (tool-names call))]
    (if (= 0 r.ran) call
        (or r.block? r.stop? (= r.decision :deny))
        (values nil {:content (.. "Blocked by a hook: " (hook.reason r)) :error? true})
        (let [out (collect [k v (pairs call)] k v)]
          (when r.updated-input (set out.args (hook.tool-args call.name r.updated-input)))
          (set out.hook-decision (if (and r.project-input? (= r.decision :allow)) nil r.decision))
          (set out.hook-context r.context)
          out))))

(fn with-note [r event notes]
  ;; R (a tool's result) with NOTES for the model after its content.
  (if (= 0 (length notes)) r
      (let [t (if (= :table (type r)) (collect [k v (pairs r)] k v) {:content (tostring (or r ""))})]
        (set t.content (.. (tostring (or t.content "")) "\n\n[" event " hook] " (table.concat notes "\n")))
        t)))

(fn agent.post-tool-hooks [call r]
  "Fire PostToolUse (or PostToolUseFailure for an error result) for the tool CALL that ran
with result R. Returns R, with what the model should read added to its content: a hook's block
reason (exit 2's stderr, `decision: block`), its `additionalContext`, and PreToolUse's."
  (let [failed? (and (= :table (type r)) (= true r.error?))
        content (if (= :table (type r)) (tostring (or r.content "")) (tostring (or r "")))
        event (if failed? :PostToolUseFailure :PostToolUse)
        res (hook.fire event #(tool-event call (if failed? {:error content}
                                                    {:tool_response {: content}}))
                       (tool-names call))
        notes (icollect [_ c (ipairs (or call.hook-context [])) &into []] c)]
    (each [_ b (ipairs res.blocks)] (table.insert notes b))
    (each [_ c (ipairs res.context)] (table.insert notes c))
    (with-note r event notes)))

(fn agent.ask-with-hooks [call]
  "Ask about the tool CALL as `agent.ask-about` does, after PermissionRequest's hooks (an
allow answers :allow-once, a deny :reject-once with its reason in CALL's :hook-reason) and a
Notification that oml needs permission."
  (let [r (hook.fire :PermissionRequest #(tool-event call) (tool-names call))]
    (if (or r.block? (= r.decision :deny))
        (do (set call.hook-reason (.. "a hook refused it: " (hook.reason r))) :reject-once)
        (= r.decision :allow) :allow-once
        (do (hook.fire :Notification {:message (.. "oml needs your permission to use " (hook.tool-name call.name))
                                      :notification_type :permission_prompt})
            (agent.ask-about call)))))

(fn agent.stop-hooks [continues]
  "Fire Stop (SubagentStop in a sub-agent) as the agent would end its turn, CONTINUES times
sent back already in this prompt. Returns true when a hook sends it back to work (exit 2 or
`decision: block`, within `hook.max-stop-continues`), its reason appended as a user message."
  (let [event (if (session.get :subagent) :SubagentStop :Stop)
        r (hook.fire event {:stop_hook_active (< 0 continues)})]
    (when (and r.block? (not r.stop?) (< continues (oml.setting "hook.max-stop-continues")))
      (session.append-message! {:role :user
                                :content (.. "<hook-context event=\"" event "\">\nA " event " hook asks you to go on: "
                                             (hook.reason r) "\n</hook-context>")})
      true)))

(fn agent.subagent-start-hooks [child def prompt]
  "Fire SubagentStart for the sub-agent session CHILD of DEF (matched on its name); returns
PROMPT with the context the hooks added before it."
  (let [r (hook.fire :SubagentStart {:agent_id child :agent_type def.name} [def.name])]
    (if (< 0 (length r.context))
        (.. (. (hook.context-message :SubagentStart r.context) :content) "\n\n" prompt)
        prompt)))

(fn agent.pre-compact-hooks [trigger ?instructions]
  "Fire PreCompact (TRIGGER :manual or :auto, matched on it) before a compaction."
  (hook.fire :PreCompact {: trigger :custom_instructions (or ?instructions "")} [trigger]))

(fn agent.session-end-hooks [session-id]
  "Fire SessionEnd for SESSION-ID, closed, when its SessionStart fired in this process (the
registry calls it once the session is gone: its directory is remembered)."
  (let [s (. started session-id)]
    (when s
      (tset started session-id nil)
      (when (oml.setting "hook.enabled?")
        (let [found (hook.handlers :SessionEnd [] nil s.cwd)
              input {:session_id session-id :hook_event_name :SessionEnd :cwd s.cwd
                     :transcript_path s.transcript-path :reason :other}]
          (each [_ h (ipairs found.lisp)] (pcall h.fn input))
          (when (< 0 (length found.commands))
            (hook.run (icollect [_ c (ipairs found.commands)] c.handler) input s.cwd
                      {:CLAUDE_PROJECT_DIR s.cwd :OML_PROJECT_DIR s.cwd})))))))

;; The sessions a hook answered `continue: false` in, with its stop reason, until the loop sees it.
(local stops {})

(fn agent.hook-stop! [reason ?session-id]
  "Make the session's loop (the current one, or ?SESSION-ID's) end its turn after the model
call under way, as a hook's `continue: false` asks; REASON is shown to the user."
  (let [sid (or ?session-id (session.current))]
    (when sid
      (tset stops sid reason)
      (session.emit! {:type :notice :text (.. "A hook stopped the agent: " reason)} sid))))

(fn agent.hook-stopped? []
  "Whether a hook asked this session's loop to stop (`agent.hook-stop!`); the request is taken."
  (let [sid (session.current)
        reason (and sid (. stops sid))]
    (when reason (tset stops sid nil))
    (not= nil reason)))

(fn agent.hook-mode [call mode]
  "The permission mode the check of the tool CALL uses: the session's MODE, but :yolo where a
PreToolUse hook allowed the call and :ask where one asked (`agent.pre-tool-hooks`); a read-only
session stays read-only. The deny rules apply in every mode."
  (if (= mode :read-only) mode
      (= call.hook-decision :allow) :yolo
      (= call.hook-decision :ask) :ask
      mode))
