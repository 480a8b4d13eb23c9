;; The Lisp side of MCP servers: declaring them (`mcp.defserver`), which servers a session
;; starts with (`mcp.server-specs`), and their tools as entries of `agent.tools`
;; (`mcp.tool-entries`, which the agent calls by name). The host functions (`mcp.servers`,
;; `mcp.tools`, `mcp.call`, `mcp.restart`) are in src/bind/mcp.rs, and `mcp.found` (the servers
;; of .mcp.json and Codex's config.toml) in src/bind/mcp/files.rs; the /mcp command that shows
;; them is the agent's (src/agent/commands.fnl).

(local mcp _G.mcp)

(set mcp.declared (or mcp.declared {}))

(fn mcp.defserver [name spec]
  "Declare the MCP server NAME for the sessions started from now on. SPEC is
{:command \"prog\" :args [\"--flag\"] :env {:VAR \"value\"}} for a server oml starts (stdio),
or {:url \"https://host/mcp\" :headers {:Authorization \"Bearer …\"}} for a streamable HTTP
server. Its tools are offered to the model as mcp__NAME__TOOL. In `oml acp` the editor's
servers are added, and win over a declared one of the same name. Returns NAME."
  (assert (= :string (type name)) "mcp.defserver: the name must be a string")
  (assert (= :table (type spec)) "mcp.defserver: the spec must be a table")
  (tset mcp.declared name spec)
  name)

(fn mcp.undefserver [name]
  "Forget the declared MCP server NAME: sessions started from now on do not get it."
  (tset mcp.declared name nil)
  nil)

(fn mcp.server-specs [dir]
  "The declared MCP servers a session in the directory DIR starts with, as a table of name →
spec: `mcp.declared`, filled by `mcp.defserver`. Redefine it to choose servers by project.
The session adds the servers of .mcp.json and Codex's config.toml whose names these do not
take (see `mcp.found`)."
  (let [_ dir] mcp.declared))

(fn mcp.tool-description [t]
  "What the MCP tool T (an entry of `mcp.tools`) says it does, or a sentence naming it."
  (if (and (= :string (type t.description)) (not= "" t.description))
      t.description
      (.. "The " t.tool " tool of the MCP server " t.server ".")))

(fn mcp.tool-entries []
  "The current session's MCP tools as entries of `agent.tools`: {:name :fn :spec :kind :title
:mcp}, where :fn calls the tool through `mcp.call` and :mcp is {:server :tool :read-only?
:destructive?}. Empty outside a session or without servers."
  (let [(ok tools) (pcall mcp.tools)]
    (if (not ok)
        []
        (icollect [_ t (ipairs tools)]
          {:name t.name :table :mcp :kind t.kind :title (.. t.server ": " (if (= :string (type t.title)) t.title t.tool))
           :spec {:name t.name :description (mcp.tool-description t) :parameters t.parameters}
           :mcp {:server t.server :tool t.tool :read-only? t.read-only? :destructive? t.destructive?}
           :fn (fn [args] (mcp.call t.server t.tool (or args {})))}))))
