;; The permission policy: which tool calls may run under the session's permission mode, asking
;; the front end (`agent.ask-about`, which puts `agent.ask-permission` to the user's session)
;; where the mode says so, and the session's rules that an "always" answer adds. Loaded after
;; agent.fnl; every function here is looked up by name at call time, so an init file can
;; redefine or advise any of it (advising `agent.check-permission` replaces the whole policy).
;;
;; "Always" adds a rule, not a blanket allowance for the tool: for a command its leading words
;; (`npm test`, `cargo build`), or the exact command when it has no plain second word or chains
;; commands; for write and edit, the tool inside the workspace (the project root), or the one
;; file when it is outside.

(local agent _G.agent)
(local session _G.session)
(local project _G.project)
(local commands _G.commands)
(local oml _G.oml)

(local edit-kinds {:edit true :delete true :move true})

;; Characters that chain, substitute or redirect in a shell command: a command holding one of
;; them never matches a prefix rule.
(local shell-specials "[;&|`$<>()\n\\]")

;;; What a call shows: its card and its question

(defsetting agent.card-arg-max-chars 65536 :integer
  "Characters of one argument a tool card shows (the tool-start event's :args, the editor's rawInput); a longer one keeps its head and says how much was cut. The tool gets its arguments whole.")

(fn agent.card-args [args]
  "ARGS (a tool call's arguments) as its card shows them: a string longer than
`agent.card-arg-max-chars` keeps its head and says how many characters were cut (`oml.cap-head`),
so a `write` of a large file does not go to the front end again as input next to its diff. ARGS
itself when nothing is that long."
  (let [max (oml.setting "agent.card-arg-max-chars")
        long? (fn [v] (and (= :string (type v)) (> (length v) max)))]
    (if (accumulate [any false _ v (pairs args) &until any] (long? v))
        (collect [k v (pairs args)] k (if (long? v) (oml.cap-head v max) v))
        args)))

(fn agent.ask-permission [request]
  "Ask the frontend whether the tool call REQUEST {:id :name :args :kind :title :locations} may
run. Returns :allow-once, :allow-always, :reject-once, :reject-always, :cancelled or :cannot-ask.
This default cannot ask anyone (print mode); a frontend that can ask redefines it."
  :cannot-ask)

(fn workspace []
  (let [cwd (session.cwd)]
    (or (project.root cwd) cwd)))

(fn real [path]
  (let [(ok abs) (pcall session.resolve-path path)]
    (if ok abs path)))

(fn under? [path dir]
  (or (= path dir) (= (path:sub 1 (+ 1 (length dir))) (.. dir "/"))))

;; Folders of the workspace that oml or git load code from: a file there counts as outside, as
;; does one in oml's own folders (`oml.own-folders`) when the workspace holds them (a session in
;; the home folder), but for oml's worktrees (`project.worktrees-folder`), which hold none.
(local code-folders [".oml" ".git"])
;; What other agents keep their hooks, MCP servers and settings in (`.mcp.json` is a file):
;; treated like those folders, so an edit there asks even in accept-edits. Trust covers the
;; settings files, so an edit would end the project's trust too (hooks.md).
(local agent-setup [".claude" ".codex" ".mcp.json"])

(fn code-folder [path root]
  (or (accumulate [found nil _ name (ipairs code-folders) &until found]
        (when (under? path (.. root "/" name)) (.. root "/" name)))
      (accumulate [found nil _ name (ipairs agent-setup) &until found]
        (when (under? path (.. root "/" name)) (.. root "/" name)))
      (when (not (under? path (project.worktrees-folder)))
        (accumulate [found nil _ dir (ipairs (oml.own-folders)) &until found]
          (when (under? path dir) dir)))))

(fn inside? [path root]
  ;; PATH is real (`call-path`); the root is made real too, so a workspace under a linked
  ;; folder holds its own files, and a link out of it leads outside.
  (let [root (real root)]
    (and (under? path root) (not (code-folder path root)))))

(fn agent.workspace-roots []
  "The running session's workspace roots: its project root (or directory), then the client's
additional directories (ACP `additionalDirectories`), as given."
  (let [more (or (session.get :additional-directories) [])]
    (icollect [_ d (ipairs more) &into [(workspace)]] d)))

(fn root-of [path]
  ;; The workspace root PATH is inside, if any.
  (accumulate [found nil _ root (ipairs (agent.workspace-roots)) &until found]
    (when (inside? path root) root)))

(fn outside-why [path]
  (let [root (real (workspace))
        folder (and (under? path root) (code-folder path root))]
    (if (and folder (accumulate [yes false _ name (ipairs agent-setup) &until yes]
                      (= folder (.. root "/" name))))
        (.. "in " folder ", where agents keep their hooks, MCP servers and settings")
        folder (.. "in " folder ", where oml or git load code from")
        (.. "outside the workspace " root))))

(fn words [command]
  ;; Split as the shell does, on spaces and tabs only: Lua's %s also splits on \r, \v and \f,
  ;; which bash keeps inside a word.
  (icollect [w (command:gmatch "[^ \t]+")] w))

(fn odd-chars? [command]
  "Whether COMMAND holds a control character other than a tab (a \r can hide text in the
question shown): such a command only ever gets an exact rule."
  (not= nil (: (command:gsub "\t" "") :find "%c")))

(fn plain-word? [w]
  (and (= :string (type w)) (not (w:find "^%-")) (not (w:find "[^%w%._:@/%+=-]"))))

(fn assignment? [w]
  (not= nil (w:find "^[%a_][%w_]*=")))

(fn number-word? [w]
  (not= nil (and w (w:find "^%d+%.?%d*[smhd]?$"))))

;; Wrappers that run the rest of the command unchanged: how many words each takes after its
;; name (options are refused rather than guessed: a wrapper with an option is no wrapper).
(local wrappers {:timeout [number-word?] :nice [] :nohup [] :command [] :env [] :time []})

;; Programs that run another program with other rights: a rule never covers them.
(local privileged {:sudo true :doas true :su true :pkexec true :run0 true})

;; Programs that run whatever their arguments say (`eval git push`, `find . -exec …`,
;; `xargs rm`, a shell): a rule for one of their commands would cover any other, so they only
;; ever get exact rules.
(local runners {:eval true :exec true :builtin true :xargs true :find true :parallel true
                :watch true :source true :. true :sh true :bash true :dash true :zsh true
                :ksh true :fish true})

(fn agent.command-program [command]
  "The words of the shell COMMAND that name what runs, past the wrappers that do not change it
(`timeout N`, `nice`, `nohup`, `command`, `time`, a bare `env`): a list of words, or nil with the
reason when no rule may name it — leading variable assignments (`A=1 cmd`, `env A=1 cmd`: they
can change what runs), a privileged runner (`sudo`, `doas`, `su`, `pkexec`, `run0`), a program
that runs what its arguments say (`eval`, `exec`, `xargs`, `find`, a shell), a control
character other than a tab, a wrapper with an option, or nothing left to run."
  (let [ws (words command)]
    (var i 1)
    (var why nil)
    (while (and (not why) (. ws i) (. wrappers (. ws i)))
      (let [arity (. wrappers (. ws i))]
        (set i (+ i 1))
        (each [_ ok? (ipairs arity)]
          (if (ok? (. ws i)) (set i (+ i 1))
              (set why (.. "`" (. ws (- i 1)) "` with an option or no duration"))))
        (when (and (not why) (. ws i) (: (. ws i) :find "^%-"))
          (set why (.. "a wrapper's option `" (. ws i) "`")))))
    (let [program (. ws i)]
      (if why (values nil why)
          (= nil program) (values nil "nothing to run")
          (assignment? program) (values nil "leading variable assignments")
          (. privileged program) (values nil (.. "`" program "` runs with other rights"))
          (. runners program) (values nil (.. "`" program "` runs whatever its arguments say"))
          (odd-chars? command) (values nil "control characters")
          (fcollect [j i (length ws)] (. ws j))))))

(fn call-path [call]
  ;; The file the call changes, as `session.resolve-path` resolves it: every link followed.
  (let [p (and (= :table (type call.args)) call.args.path)
        (ok abs) (pcall session.resolve-path (or p ""))]
    (when ok abs)))

(fn denied-path? [call]
  ;; Whether the `path` of CALL lies inside a sandbox.deny-read path.
  (let [p (and (= :table (type call.args)) call.args.path)]
    (and (= :string (type p)) (not= p "") (oml.denied-read? p))))

(fn secret-read? [call]
  ;; Whether oml's own read, ls, grep or find CALL looks inside a sandbox.deny-read path; a
  ;; search (grep, find) also when one lies beneath the folder it walks (default: the session's).
  (when (and (not call.mcp) (or (= call.kind :read) (= call.kind :search)))
    (let [p (and (= :table (type call.args)) call.args.path)
          p (if (and (= :string (type p)) (not= p "")) p
                (= call.kind :search) "."
                nil)]
      (and p (oml.denied-read? p (= call.kind :search))))))

(fn agent.permission-rule [call]
  "The rule an \"always\" answer to the tool CALL {:name :args} adds: for bash, the program and
its subcommand (`agent.command-program`: past `timeout N`, `nice` and the like) when both are
plain words and nothing chains or redirects ({:tool :bash :prefix \"npm test\"}), else the exact
command ({:tool :bash :exact ...}) — always the exact command after variable assignments or
`sudo`; for write and edit, the tool inside the workspace ({:tool :edit :inside root}) or the one
file outside it ({:tool :edit :path abs}); for any other tool, the tool ({:tool name})."
  (let [name call.name
        args (or call.args {})]
    (case name
      :bash (let [command (or args.command "")
                  program (agent.command-program command)]
              (if (and program (not (command:find shell-specials)) (plain-word? (. program 1))
                       (plain-word? (. program 2)))
                  {:tool :bash :prefix (.. (. program 1) " " (. program 2))}
                  {:tool :bash :exact command}))
      _ (let [path (and (. edit-kinds call.kind) (call-path call))
              root (and path (root-of path))]
          (if root {:tool name :inside root}
              path {:tool name :path path}
              {:tool name})))))

(fn agent.rule-tool? [rule call]
  "Whether the permission RULE names the tool of CALL: its :tool; one of its :tools (oml's own
tools, not an MCP server's); every tool of its :mcp-server (the settings files' rules,
`agent.setting-rules`)."
  (if rule.tools (and (not call.mcp)
                      (accumulate [ok false _ t (ipairs rule.tools)] (or ok (= t call.name))))
      rule.mcp-server (let [head (.. "mcp__" rule.mcp-server "__")]
                        (or (and call.mcp (= call.mcp.server rule.mcp-server))
                            (= head (call.name:sub 1 (length head)))))
      (= rule.tool call.name)))

(fn agent.tool-path [call]
  "The real path (`session.resolve-path`, links followed) the tool CALL works on: its `path`
argument, else the session's directory (where ls, grep and find look by default); nil when it
cannot be resolved."
  (let [p (and (= :table (type call.args)) call.args.path)
        (ok abs) (pcall session.resolve-path (if (and (= :string (type p)) (not= p "")) p "."))]
    (when ok abs)))

(fn agent.rule-matches? [rule call]
  "Whether the permission RULE (see `agent.permission-rule`; a settings file's may also hold
:tools, :glob or :mcp-server) covers the tool CALL."
  (let [args (or call.args {})]
    (if (not (agent.rule-tool? rule call)) false
        rule.prefix (let [command (or args.command "")
                          want (words rule.prefix)
                          have (agent.command-program command)]
                      (and have (not (command:find shell-specials))
                           (accumulate [ok true i w (ipairs want)] (and ok (= w (. have i))))))
        rule.exact (= rule.exact args.command)
        ;; A rule for a root the session no longer has (an additional directory of an
        ;; earlier connection) covers nothing.
        rule.inside (let [path (call-path call)
                          current (accumulate [ok false _ r (ipairs (agent.workspace-roots))]
                                    (or ok (= (real r) (real rule.inside))))]
                      (and path current (inside? path rule.inside)))
        rule.path (= rule.path (call-path call))
        rule.glob (let [path (agent.tool-path call)]
                    (and path (project.glob-matches? rule.glob path)))
        true)))

(fn agent.inside-workspace? [call]
  "Whether the file the tool CALL changes (its `path` argument) is inside the workspace: the
project root of the session's directory (nearest .git or .oml/), else that directory, or one of
the client's additional directories (`agent.workspace-roots`). Both are
compared as real paths (`session.resolve-path`, links followed), so a link that leads out of the
workspace counts as outside; so do the workspace's `.oml/` and `.git/`, which oml and git load
code from (init files, modules, hooks, config), and oml's own folders (`oml.own-folders`). A call
without a path counts as inside."
  (let [path (call-path call)]
    (or (= nil path) (not= nil (root-of path)))))

(fn agent.session-network? [?session-id]
  "Whether the session's commands may use the network: its own switch (the ACP config option
`network`, kept as the session value `network?`) when set, else `sandbox.network?`."
  (let [own (session.get :network? ?session-id)]
    (if (= nil own) (oml.setting "sandbox.network?") own)))

(fn agent.sandboxed? []
  "Whether commands run confined now: `sandbox.mode` is not :off and the kernel enforces it
(`oml.sandbox-status`, :full or :partial)."
  (let [(ok status) (pcall oml.sandbox-status)]
    (and ok (= :table (type status)) (not= status.mode :off)
         (or (= status.enforced :full) (= status.enforced :partial)))))

(fn agent.describe-rule [rule]
  "The permission RULE in words, as questions and /permissions show it."
  (if rule.prefix (.. "`" rule.prefix " …` commands")
      rule.exact (.. "the command `" rule.exact "`")
      rule.inside (.. rule.tool " inside " rule.inside)
      rule.path (.. rule.tool " of " rule.path)
      rule.glob (.. (table.concat rule.tools ", ") " of " rule.glob)
      rule.tools (.. "every " (table.concat rule.tools ", ") " call")
      rule.mcp-server (.. "every tool of the MCP server " rule.mcp-server)
      (.. "every " rule.tool " call")))

(fn agent.permission-rules [?session-id]
  "The permission rules of the session (the current one, or ?SESSION-ID): a list of
{:rule :verdict}, verdict :allow or :reject, oldest first."
  (or (session.get :permission-rules ?session-id) []))

(fn agent.add-permission-rule! [rule verdict]
  "Add the permission RULE with VERDICT (:allow or :reject) to the current session's rules,
replacing an equal rule. Returns the rules."
  (let [same? (fn [r] (and (= r.tool rule.tool) (= r.prefix rule.prefix) (= r.exact rule.exact)
                           (= r.inside rule.inside) (= r.path rule.path)))
        rules (icollect [_ r (ipairs (agent.permission-rules))] (when (not (same? r.rule)) r))]
    (table.insert rules {: rule : verdict})
    (session.put! :permission-rules rules)
    rules))

(fn agent.rule-verdict [call]
  "The verdict (:allow or :reject) of the newest rule covering the tool CALL: the session's
rules, then those saved for the project (`project.saved-rules`, only while it is trusted); nil
when none covers it."
  (let [rules (icollect [_ r (ipairs (project.saved-rules (workspace)))] r)]
    (each [_ r (ipairs (agent.permission-rules))] (table.insert rules r))
    (var verdict nil)
    (for [i (length rules) 1 -1 &until verdict]
      (let [r (. rules i)]
        (when (agent.rule-matches? r.rule call) (set verdict r.verdict))))
    verdict))

(fn agent.change-failure [call]
  "Why oml's own write or edit CALL {:name :args} would fail if it ran — the tool's message, from
`oml.preview-change` (old_text not found, a folder, ...) — or nil when it would not, and for any
other tool. `agent.check-permission` fails such a call at once rather than ask about it; the ACP
front end redefines this to look at the editor's text when the tool writes through the editor."
  (when (and (not call.mcp) (or (= call.name :write) (= call.name :edit)))
    (let [(ok diff why) (pcall oml.preview-change call.name (or call.args {}))]
      (when (and ok (not diff)) why))))

(fn loads-code? [call]
  ;; Whether the edit CALL changes a file oml, git or other agents load code from (`code-folder`:
  ;; .oml/, .git/, .claude/, .codex/, .mcp.json, oml's own folders): no settings allow covers it.
  (let [path (and (. edit-kinds call.kind) (call-path call))]
    (not= nil (and path (code-folder path (real (workspace)))))))

(fn cannot-ask [call needs mode ?setting]
  ;; Why CALL may not run where nobody can be asked.
  (let [what (if (and (= needs :edit) (not (agent.inside-workspace? call)))
                 (.. call.name " of " (call-path call) " (" (outside-why (call-path call)) ")")
                 call.name)]
    (if ?setting
        (.. what " is one the rule `" ?setting.text "` of " ?setting.source
            " asks about, and this frontend cannot ask; run it where you can answer")
        (.. what " needs permission in " mode " mode and this frontend cannot ask; choose another mode (oml -p --mode, or agent.permission-mode)"))))

(fn ask-user [call needs mode ?setting]
  ;; Put CALL to the user (`agent.ask-with-hooks`) — unless it is a write or edit that would fail,
  ;; whose failure is its result — and keep what an "always" answer adds. ?SETTING is the
  ;; settings file's ask rule that forces the question.
  (case (when (and (agent.inside-workspace? call) (not (denied-path? call)))
          (agent.change-failure call))
    why {:content why :error? true}
    _ (case (agent.ask-with-hooks call)
        :allow-once nil
        :allow-always (do (agent.add-permission-rule! (agent.permission-rule call) :allow) nil)
        :reject-always (do (agent.add-permission-rule! (agent.permission-rule call) :reject)
                           "the user rejected it")
        :reject-once (or call.hook-reason "the user rejected it")
        :cancelled "the prompt was cancelled before the user answered"
        _ (cannot-ask call needs mode ?setting))))

(fn agent.check-permission [call]
  "nil when the tool CALL {:id :name :args :kind} may run under this session's permission
mode and rules, else the reason it may not; or, where it would ask about a write or edit that
would fail (`agent.change-failure`), that failure as the call's result {:content :error? true},
so nobody is asked about a change that cannot be made. Tools of kind edit, delete and move count as edits;
kind execute (bash) as commands; an MCP server's tool (:mcp in CALL) that the server does not
mark read-only as an MCP call, asked about in every mode but yolo (read-only refuses it); so is
oml's own read, ls, grep or find of a path inside `sandbox.deny-read` (`oml.denied-read?`); every
other kind always runs. accept-edits runs edits inside
the workspace only (`agent.inside-workspace?`), and commands only while they run confined
(`agent.sandboxed?`); others ask. An \"always\" answer adds
`agent.permission-rule` of the call to the session's rules.

The settings files' rules (`agent.setting-verdict`) come first and last: a deny rule refuses
the call in every mode, yolo included, over any allow; an ask rule asks even where the mode
would run it (refused where nobody can be asked); an allow rule runs it without asking where
the mode would ask, after the session's own rules, but for an edit in the workspace's .oml/,
.git/, .claude/, .codex/ or .mcp.json or in oml's own folders."
  (let [mode (agent.hook-mode call (agent.current-permission-mode))
        needs (if (and call.mcp (not call.mcp.read-only?)) :mcp
                  (. edit-kinds call.kind) :edit
                  (= call.kind :execute) :execute
                  (secret-read? call) :secret
                  nil)
        setting (agent.setting-verdict call)
        read-only (.. "the session is read-only (agent.permission-mode), so " call.name " may not run")]
    (if (and setting (= setting.verdict :deny))
        (.. "the rule `" setting.text "` of " setting.source " denies it")
        (and setting (= setting.verdict :ask))
        (if (and needs (= mode :read-only)) read-only (ask-user call needs mode setting))
        (or (= nil needs) (= mode :yolo)) nil
        (= mode :read-only) read-only
        (and (= mode :accept-edits) (= needs :edit) (agent.inside-workspace? call)) nil
        (and (= mode :accept-edits) (= needs :execute) (agent.sandboxed?)) nil
        (case (agent.rule-verdict call)
          :allow nil
          :reject (.. "the user always rejects " (agent.describe-rule (agent.permission-rule call)))
          _ (when (or (not setting) (loads-code? call)) (ask-user call needs mode))))))

(fn settings-listing []
  ;; The settings files' rules (`agent.setting-rules`) as /permissions lists them, or "".
  (let [{: rules : problems} (agent.setting-rules)
        lines (icollect [_ r (ipairs rules)]
                (.. "- " r.verdict " `" r.text "` (" r.source ")"
                    (if r.used? "" (.. ": not used, " r.why))))]
    (each [_ p (ipairs problems)]
      (table.insert lines (.. "- problem in " p.file ": " p.message)))
    (if (= 0 (length lines)) ""
        (.. "\nFrom settings files:\n" (table.concat lines "\n")))))

(fn commands.permissions [input]
  {:fnl/docstring "List this session's permission rules (what \"always\" answers added), those saved for the project and those of the settings files (`agent.setting-rules`); `clear` removes the session's all, `remove N` one; `save` keeps them for this project (used while it is trusted), `forget` drops the saved ones."
   :hint "[clear | remove N | save | forget]"}
  (let [rules (agent.permission-rules)
        n (tonumber (input:match "^remove%s+(%d+)$"))
        saved (project.saved-rules (workspace))]
    (if (= input :clear)
        (do (session.put! :permission-rules []) "Permission rules cleared.")
        (= input :save)
        (let [file (project.save-rules! (workspace) rules)]
          (.. "Saved " (length rules) " rules for " (workspace) " in " file
              "; they apply in new sessions while the project is trusted (oml trust)."))
        (= input :forget)
        (do (project.save-rules! (workspace) []) (.. "Forgot the rules saved for " (workspace) "."))
        n (if (. rules n)
              (let [gone (table.remove rules n)]
                (session.put! :permission-rules rules)
                (.. "Removed: " gone.verdict " " (agent.describe-rule gone.rule)))
              (.. "No rule " n))
        (let [from-files (settings-listing)]
          (if (and (= 0 (length rules)) (= 0 (length saved)))
              (.. "No " (if (= from-files "") "" "session ") "permission rules yet (mode "
                  (agent.current-permission-mode) ")." from-files)
              (.. (table.concat (icollect [i r (ipairs rules)]
                                  (.. i ". " r.verdict " " (agent.describe-rule r.rule)))
                                "\n")
                  (if (< 0 (length saved))
                      (.. (if (< 0 (length rules)) "\n" "") "Saved for this project:\n"
                          (table.concat (icollect [_ r (ipairs saved)]
                                          (.. "- " r.verdict " " (agent.describe-rule r.rule)))
                                        "\n"))
                      "")
                  from-files))))))
