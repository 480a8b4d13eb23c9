;; Sub-agent definitions: `agent.def` in Lisp, then those `project.agent-defs` finds on disk
;; (the project's .oml/agents, .claude/agents and .codex/agents, then the user's); what a
;; definition may grant a sub-agent under its parent (`agent.granted`, the trust rule); the
;; names and descriptions the model is told (`agent.agents-text`); and /agents. It runs no
;; sub-agent: the `task` tool does, asking here. Loaded after skills.fnl.

(local oml _G.oml)
(local fennel (require :fennel))
(local agent _G.agent)
(local tools _G.tools)
(local commands _G.commands)
(local session _G.session)
(local project _G.project)

(set agent.defined (or agent.defined {}))
(var generation 0)

;; What a permission mode and a sandbox mode allow, least first: nothing a definition says
;; raises a sub-agent above its parent.
(local mode-rank {:read-only 1 :ask 2 :accept-edits 3 :yolo 4})
(local sandbox-of {:read-only :read-only :workspace-write :workspace-write
                   :danger-full-access :off :off :off})
(local sandbox-rank {:read-only 1 :workspace-write 2 :off 3})

;;; agent.def

(fn names? [v] (and (= :table (type v)) (accumulate [ok true _ x (ipairs v)] (and ok (= :string (type x))))))

(fn servers-of [v]
  "The MCP servers V (names, {:name …} tables, or a map of name → spec) as {:name …} tables."
  (if (= nil v) nil
      (not= :table (type v)) (error "agent.def: :mcp-servers is a list of names or {:name …} tables" 3)
      (= nil (next v)) []
      (. v 1) (icollect [_ s (ipairs v)]
                (if (= :string (type s)) {:name s}
                    (and (= :table (type s)) (= :string (type s.name))) s
                    (error "agent.def: each of :mcp-servers is a name or {:name …}" 4)))
      (let [names (icollect [k (pairs v)] k)]
        (table.sort names)
        (icollect [_ n (ipairs names)]
          (doto (collect [k x (pairs (. v n))] k x) (tset :name n))))))

(local checks
  {:description #(= :string (type $)) :prompt #(= :string (type $))
   :tools names? :disallowed-tools names? :skills names?
   :model #(= :string (type $)) :acp #(= :string (type $)) :reasoning-effort #(= :string (type $))
   :permission-mode #(not= nil (. mode-rank $)) :sandbox-mode #(not= nil (. sandbox-of $))
   :max-turns #(and (math.type $) (= :integer (math.type $)) (< 0 $))
   :background #(= :boolean (type $)) :isolation #(= $ :worktree)
   :mcp-servers #(= :table (type $))})

(fn agent.def [name spec]
  "Define the sub-agent NAME. SPEC is {:description :prompt} (both strings; the description says
the model when to use it, the prompt is its system prompt) with any of :tools and
:disallowed-tools (lists of tool names; no :tools means every tool), :model, :acp (an ACP agent
to drive instead of a model), :permission-mode (an id of `agent.permission-modes`), :max-turns,
:skills (names), :mcp-servers (names, or {:name :command …} / {:name :url …}), :background,
:isolation (:worktree), :reasoning-effort and :sandbox-mode (:read-only, :workspace-write,
:danger-full-access). It wins over a definition of the same name on disk. Returns NAME."
  (when (or (not= :string (type name)) (not (name:find "^[%w_%-%.:]+$")))
    (error "agent.def: the name is a string of letters, digits, -, _, . and :" 2))
  (when (or (not= :table (type spec)) (not= :string (type spec.description)))
    (error "agent.def: expected (agent.def :name {:description \"…\" :prompt \"…\"})" 2))
  (each [k v (pairs spec)]
    (let [ok? (. checks k)]
      (when (not ok?)
        (error (.. "agent.def: unknown key :" (tostring k)) 2))
      (when (not (ok? v))
        (error (.. "agent.def: :" k " cannot be " (fennel.view v)) 2))))
  (let [def (collect [k v (pairs spec)] k v)
        info (debug.getinfo 2 :Sl)]
    (set def.name name)
    (set def.prompt (or spec.prompt ""))
    (set def.mcp-servers (servers-of spec.mcp-servers))
    (set def.source "agent.def")
    (set def.line (and info info.currentline))
    (set def.project? false)
    (tset agent.defined name def))
  (set generation (+ generation 1))
  name)

;;; Discovery

(fn known-tool? [name]
  "Whether NAME is a tool of `agent.tool-tables` (offered now or not) or an MCP tool's name."
  (or (= 1 (name:find "mcp__" 1 true))
      (accumulate [hit false _ tname (ipairs (or agent.tool-tables [:tools])) &until hit]
        (let [t (oml.lookup tname)]
          (and (= :table (type t)) (= :function (type (. t name))))))))

(fn checked [def problems]
  "DEF with the tool names no tool has left out, each a problem at its field's line."
  (if (and (= nil def.tools) (= nil def.disallowed-tools))
      def
      (let [out (collect [k v (pairs def)] k v)]
        (each [_ field (ipairs [:tools :disallowed-tools])]
          (when (. def field)
            (tset out field
                  (icollect [_ n (ipairs (. def field))]
                    (if (known-tool? n) n
                        (table.insert problems
                                      {:file def.source
                                       :line (or (?. def :lines field) def.line 1)
                                       :message (.. "`" field "`: unknown tool `" n "`: oml has no tool of that name; left out")}))))))
        out)))

;; What `agent.agent-defs` made of each discovery (`project.agent-defs` gives the same table
;; while it is fresh), with the `agent.def` generation it was made with.
(local combined (setmetatable {} {:__mode :k}))

(fn combine [disk]
  (let [out {:found [] :shadowed [] :problems (icollect [_ p (ipairs disk.problems)] p)}
        seen {}
        names (icollect [n (pairs agent.defined)] n)]
    (table.sort names)
    (fn add [d]
      (let [d (checked d out.problems)]
        (if (. seen d.name) (table.insert out.shadowed d)
            (do (tset seen d.name true) (table.insert out.found d)))))
    (each [_ n (ipairs names)] (add (. agent.defined n)))
    (each [_ d (ipairs disk.found)] (add d))
    (each [_ d (ipairs disk.shadowed)] (table.insert out.shadowed (checked d out.problems)))
    out))

(fn agent.agent-defs [?dir]
  "The sub-agent definitions of the session (or of ?DIR): {:found :shadowed :problems}, the
`agent.def` ones first, then the project's and the user's files (`project.agent-defs`); the
first of a name wins, the rest are :shadowed. Each definition is {:name :description :prompt
:tools (oml tool names, nil for all) :disallowed-tools :model :permission-mode (an oml mode id)
:max-turns :skills :mcp-servers :background :isolation :acp :reasoning-effort :sandbox-mode
:source (its file, or \"agent.def\") :line :project?}; a problem is {:file :line :message}. The
same table while nothing changed: treat it as read-only."
  (let [disk (project.agent-defs (or ?dir (session.cwd)))
        hit (. combined disk)]
    (if (and hit (= hit.generation generation))
        hit.out
        (let [out (combine disk)]
          (tset combined disk {: generation : out})
          out))))

(fn agent.find-agent [name ?dir]
  "The sub-agent definition called NAME that wins (see `agent.agent-defs`), or nil."
  (accumulate [hit nil _ d (ipairs (. (agent.agent-defs ?dir) :found)) &until hit]
    (when (= d.name name) d)))

;;; Trust

(fn capped [wanted parent rank what refused]
  "WANTED when RANK says it is at most PARENT, else PARENT with a line in REFUSED."
  (if (= nil (. rank wanted))
      (do (table.insert refused (.. what " " (tostring wanted) " is unknown; " parent " is used"))
          parent)
      (<= (. rank wanted) (. rank parent))
      wanted
      (do (table.insert refused (.. what " " wanted " is above the parent's " parent "; "
                                    parent " is used"))
          parent)))

(fn servers-granted [def trusted? refused]
  "The MCP servers of DEF it may have: a user's all; a project's none while it is not TRUSTED?,
and of its own (:command or :url) only from a file `oml trust` covers (.oml/agents at the root:
.claude/agents and .codex/agents are not, and commands may write them)."
  (if (not def.project?) def.mcp-servers
      (not trusted?)
      (do (table.insert refused (.. "the MCP servers of " def.source
                                    " (the project is not trusted: oml trust)"))
          nil)
      (icollect [_ s (ipairs def.mcp-servers)]
        (if (or def.trust-covered? (and (= nil s.command) (= nil s.url))) s
            (table.insert refused (.. "the MCP server " (tostring s.name) " of " def.source
                                      " (a server of its own is started only from the project's .oml/agents, which oml trust records)"))))))

(fn agent.granted [def parent-mode trusted? ?parent-sandbox]
  "What the sub-agent definition DEF may have under a parent session in PARENT-MODE (a
permission mode id) when its project is TRUSTED? (`project.trusted?`): {:permission-mode
:mcp-servers :sandbox-mode :refused}. The permission mode is DEF's when it is at most
PARENT-MODE (read-only < ask < accept-edits < yolo), else PARENT-MODE; the sandbox mode
likewise at most the parent's, ?PARENT-SANDBOX (a sub-agent's own) and `sandbox.mode`, the
narrower (read-only < workspace-write < off; Codex's danger-full-access is off), nil meaning
the parent's; the MCP servers are DEF's, nil meaning the parent's: a
project's definition gets none while the project is not trusted, and starts servers of its own
(:command, :url) only from the project's .oml/agents, which `oml trust` records. Nothing a file
says raises a sub-agent above its parent, from the project or the user. :refused says, one
line each, what DEF asked for and did not get."
  (when (not (. mode-rank parent-mode))
    (error (.. "agent.granted: " (tostring parent-mode) " is not a permission mode") 2))
  (let [refused []
        mode (if def.permission-mode
                 (capped def.permission-mode parent-mode mode-rank "the permission mode" refused)
                 parent-mode)
        setting (or (oml.setting "sandbox.mode") :workspace-write)
        parent-sandbox (if (and ?parent-sandbox (. sandbox-rank ?parent-sandbox)
                                (< (. sandbox-rank ?parent-sandbox) (or (. sandbox-rank setting) 2)))
                           ?parent-sandbox
                           setting)
        sandbox (when def.sandbox-mode
                  (capped (. sandbox-of def.sandbox-mode) parent-sandbox sandbox-rank
                          "the sandbox mode" refused))
        servers (when def.mcp-servers (servers-granted def trusted? refused))]
    {:permission-mode mode :mcp-servers servers :sandbox-mode sandbox :refused refused}))

;;; The system prompt and /agents

;; The listing made of each `agent.agent-defs` result.
(local texts (setmetatable {} {:__mode :k}))

(fn agent.agents-text [?dir]
  "The sub-agents block of the system prompt for ?DIR (default: the session's): each
definition's name and description, and how to run one; nil when there are none, or no `task`
tool to run them with."
  (let [d (agent.agent-defs ?dir)
        found d.found]
    (when (and (< 0 (length found)) (known-tool? :task))
      (or (. texts d)
          (let [text (.. "Sub-agents: helpers with their own instructions and tools, each run with the task tool (agent: its name, prompt: what to do). Give a task to one when it matches its description; it sees only the prompt you give it.\n"
                         (table.concat (icollect [_ a (ipairs found)] (.. "- " a.name ": " a.description))
                                       "\n"))]
            (tset texts d text)
            text)))))

(fn agent-line [d state]
  (.. "- `" d.name "` " d.source (if (and d.line (not= d.source "agent.def")) (.. ":" d.line) "")
      (if d.project? " (project)" "") (if state (.. " (" state ")") "")))

(fn commands.agents [input]
  {:fnl/docstring "List the sub-agent definitions: where each comes from, and which are shadowed or could not be read."}
  (let [d (agent.agent-defs)
        lines []]
    (each [_ a (ipairs d.found)] (table.insert lines (agent-line a nil)))
    (each [_ a (ipairs d.shadowed)] (table.insert lines (agent-line a "shadowed by one of the same name")))
    (each [_ p (ipairs d.problems)]
      (table.insert lines (.. "- " p.file ":" p.line ": " p.message)))
    (if (= 0 (length lines))
        "No sub-agents. Put a NAME.md (Claude Code's format) in .oml/agents or .claude/agents of the project, a NAME.toml (Codex's) in .codex/agents, or either in the agents folder of oml's config folder; or use agent.def."
        (table.concat lines "\n"))))
