;; The `/worktrees` command: oml's git worktrees of the session's repository (`project.worktrees`,
;; made by `project.worktree-add` for sub-agents and `oml compare`), each with what it changed;
;; merging one into the work tree or removing it, each after a question to the user
;; (`agent.ask-permission`). The git work is `project.*`'s; this file only words it. Loaded after
;; commands.fnl.

(local oml _G.oml)
(local agent _G.agent)
(local project _G.project)
(local commands _G.commands)
(local session _G.session)

(fn stat-of [tree]
  ;; The diff stat's last line ("2 files changed, …"), or why there is none.
  (if (= "" tree.base) "base unknown"
      (let [(ok stat) (pcall project.worktree-diffstat tree.path tree.base)]
        (if (not ok) (oml.error-message stat)
            (= "" stat) "no changes"
            (or (stat:match "([^\n]*)\n?$") stat)))))

(fn agent.worktrees-text [dir]
  "oml's worktrees of the repository DIR is in, as /worktrees shows them: one line each with its
name, branch, folder and diff stat against the commit it started from."
  (let [trees (project.worktrees dir)]
    (if (= 0 (length trees))
        "No worktrees of oml's in this repository."
        (table.concat
          (icollect [_ tree (ipairs trees)]
            (.. "- `" tree.name "` on `" tree.branch "` in " tree.path ": " (stat-of tree)))
          "\n"))))

(fn confirmed? [what name dir path]
  ;; The user's yes to WHAT (:merge or :remove) of the worktree NAME at PATH, asked as the git
  ;; command it runs (confined, in DIR) would be.
  (let [command (if (= what :merge)
                    (.. "git add -A && git commit (in " path ") && git merge --no-edit oml/" name)
                    (.. "git worktree remove --force " path " && git branch -D oml/" name))]
    (case (agent.ask-permission {:id (.. "worktrees-" what "-" name) :name :bash
                                 :args {: command} :kind :execute
                                 :title (.. "/worktrees " what " " name)
                                 :locations [{:path dir}]})
      :allow-once true
      :allow-always true
      :cannot-ask (values false "nobody can be asked here, so nothing was done")
      _ (values false "not confirmed: nothing was done"))))

(fn act [what name dir]
  (let [known (accumulate [found nil _ tree (ipairs (project.worktrees dir)) &until found]
                (when (= tree.name name) tree))
        (yes why) (if known (confirmed? what name dir known.path)
                      (values false "no worktree of oml's has that name (/worktrees lists them)"))]
    (if (not yes) (.. "/worktrees " what " " name ": " why)
        (let [f (if (= what :merge) project.worktree-merge project.worktree-remove)
              done (f dir name)
              said (if (= "" done.output) "" (.. "\n\n```\n" done.output "\n```"))]
          (.. (if done.ok
                  (if (= what :merge) (.. "Merged oml/" name ".") (.. "Removed " name "."))
                  (.. "git could not " what " " name "."))
              said)))))

(fn commands.worktrees [input]
  {:fnl/docstring "List oml's git worktrees of this repository with what each changed; merge one into the work tree or remove it (each asks first)."
   :hint "[merge NAME | remove NAME]"}
  (let [dir (session.cwd)
        (what name) (input:match "^%s*(%S+)%s+(%S+)%s*$")
        (ok text) (pcall #(if (input:match "^%s*$") (agent.worktrees-text dir)
                              (and (or (= what :merge) (= what :remove)) name) (act what name dir)
                              "Usage: /worktrees [merge NAME | remove NAME]"))]
    (if ok text (.. "/worktrees: " (oml.error-message text)))))
