;; /setup: one place that lists what oml found and applied of the files users keep for agents —
;; whether the project is trusted, hooks, MCP servers, permission rules, skills, markdown
;; commands, sub-agents and instruction files — each with its source and why anything was
;; skipped. Each section is a function in `agent.setup-sections`, so an init file can add one.
;; It reads what the other files find (hooks.fnl, skills.fnl, agents.fnl, mcp.fnl, the rules);
;; it decides nothing.

(local agent _G.agent)
(local session _G.session)
(local project _G.project)
(local commands _G.commands)
(local hook _G.hook)
(local oml _G.oml)

(fn lines-of [text]
  (icollect [l (string.gmatch (.. (or text "") "\n") "(.-)\n")] l))

(fn trust-section [dir]
  (let [root (or (project.root dir) dir)
        (ok why) (project.trusted? dir)]
    [(.. "Project " root ": "
         (if ok "trusted (oml trust): its hooks, MCP servers, rules and .oml/init.fnl are used"
             (: (tostring why) :find "^init%.project%-init")
             (.. "not trusted (" (tostring why) "), so its hooks, MCP servers, rules and .oml/init.fnl are not used")
             (.. "not trusted, or changed since it was, so its hooks, MCP servers, rules and .oml/init.fnl are not used; review it, then run `oml trust " root "`")))]))

(fn instructions-section [dir]
  (icollect [_ f (ipairs (project.instructions dir))]
    (.. "- " f.path (if f.problem (.. " (not included: the file " f.problem ")")
                        (< 0 (or f.cut 0)) (.. " (" f.cut " characters cut: project.instructions-max-chars)")
                        ""))))

(fn markdown-commands-section [dir]
  (let [found (project.prompt-commands dir (oml.setting "skills.claude?"))
        out (icollect [_ c (ipairs found.found)] (.. "- /" c.name " " c.file))]
    (each [_ c (ipairs (or found.shadowed []))]
      (table.insert out (.. "- /" c.name " " c.file " (shadowed by one of the same name)")))
    (each [_ p (ipairs (or found.problems []))]
      (table.insert out (.. "- " p.file ":" p.line ": " p.message)))
    out))

(fn mcp-section [dir]
  (let [mcp _G.mcp
        out (if (and mcp mcp.servers) (lines-of (commands.mcp "")) [])]
    (when (and mcp mcp.found)
      (each [_ s (ipairs (mcp.found dir))]
        (table.insert out (.. "- `" s.name "` from " (tostring s.source)
                              (if s.used? "" (.. " (not used: " (tostring s.why) ")"))))))
    out))

(fn rules-section [dir]
  (let [list (agent.setting-rules dir)
        out (icollect [_ r (ipairs list.rules)]
              (.. "- " (tostring r.verdict) " " (tostring r.text) "  [" (tostring r.source) "]"
                  (if r.used? "" (.. " (not used: " (tostring r.why) ")"))))]
    (each [_ p (ipairs list.problems)]
      (table.insert out (.. "! " (tostring p.file) ": " (tostring p.message))))
    out))

(set agent.setup-sections
     [{:title "Trust" :fn trust-section}
      {:title "Instruction files" :fn instructions-section}
      {:title "Hooks (/hooks)" :fn #(hook.describe $1)}
      {:title "MCP servers (/mcp)" :fn mcp-section}
      {:title "Permission rules from settings files" :fn rules-section}
      {:title "Skills (/skills)" :fn #(lines-of (commands.skills ""))}
      {:title "Markdown commands" :fn markdown-commands-section}
      {:title "Sub-agents (/agents)" :fn #(lines-of (commands.agents ""))}])

(fn agent.setup-report [?dir]
  "What oml found and applied for a session in ?DIR (default: the current session's): each of
`agent.setup-sections` ({:title :fn}, FN of the directory giving lines) under its title; a
section that fails says why rather than hiding the rest."
  (let [dir (or ?dir (session.cwd))
        parts []]
    (each [_ s (ipairs agent.setup-sections)]
      (let [(ok lines) (pcall s.fn dir)
            body (if (not ok) (.. "  (could not be listed: " (oml.error-message lines) ")")
                     (= 0 (length lines)) "  none"
                     (table.concat (icollect [_ l (ipairs lines)] (.. "  " l)) "\n"))]
        (table.insert parts (.. s.title ":\n" body))))
    (table.concat parts "\n\n")))

(fn commands.setup [input]
  {:fnl/docstring "List what oml found and applied of the files you keep for agents — trust, instruction files, hooks, MCP servers, permission rules, skills, markdown commands, sub-agents — with their sources and why anything was skipped."}
  (agent.setup-report))
