;; Discovery: the tools and slash commands, found at call time as the documented functions in
;; the tables `agent.tool-tables` and `agent.command-tables` name (and MCP's tools), and what the
;; model is told about a tool (`agent.tool-schema` from its arglist and :params, `agent.tool-spec`).
;; Loaded right after agent.fnl, whose loop calls these by name. It knows no tool and runs none.

(local oml _G.oml)
(local fennel (require :fennel))
(local agent _G.agent)
(local json _G.json)
(local session _G.session)

(defsetting agent.tool-tables [:tools] :table
  "Names of the tables whose documented functions are tools; later tables win on a name clash.")
(defsetting agent.command-tables [:commands] :table
  "Names of the tables whose documented functions are slash commands; later tables win.")

(fn meta [f key] (when f (fennel.metadata:get f key)))

(fn documented-fns [table-names]
  "Entries {:name :fn :table} of the documented functions in the tables named TABLE-NAMES."
  (let [found {}]
    (each [_ tname (ipairs (or table-names []))]
      (let [t (oml.lookup tname)]
        (when (= :table (type t))
          (each [name f (pairs t)]
            (when (and (= :string (type name)) (= :function (type f)) (meta f :fnl/docstring))
              (tset found name {: name :fn f :table tname}))))))
    (let [names (icollect [k (pairs found)] k)]
      (table.sort names)
      (icollect [_ n (ipairs names)] (. found n)))))

(fn find-entry [entries name]
  (accumulate [hit nil _ e (ipairs entries) &until hit]
    (when (= e.name name) e)))

(fn available? [entry]
  (let [f (meta entry.fn :available?)]
    (or (not= :function (type f))
        (let [(ok yes) (pcall f)] (and ok yes)))))

(fn agent.tools []
  "The tools: documented functions in the tables named by `agent.tool-tables`, as entries
{:name :fn :table} sorted by name (later tables win on a name clash; a tool whose
`:available?` metadata is a function that returns false now is left out), then the session's
MCP servers' tools (`mcp.tool-entries`: entries with :spec, :kind, :title and :mcp too), as
`agent.allowed-tools` lets the session have them."
  (let [entries (icollect [_ e (ipairs (documented-fns agent.tool-tables))]
                  (when (available? e) e))]
    (each [_ e (ipairs (or (and _G.mcp _G.mcp.tool-entries (_G.mcp.tool-entries)) []))]
      (table.insert entries e))
    (agent.allowed-tools entries)))

(fn listed? [list name]
  (accumulate [hit false _ n (ipairs list) &until hit] (= n name)))

(fn agent.allowed-tools [entries]
  "ENTRIES without the tools the session's :tool-filter {:allow :deny} leaves out (a sub-agent's
definition's `tools` and `disallowedTools`): with :allow, only the names it lists; never one :deny
lists; and of the MCP servers' tools, only those of the servers its :mcp-servers names, when it
names any. A session without a filter keeps them all."
  (let [filter (and session (session.current) (session.get :tool-filter))
        allow (and (= :table (type filter)) (= :table (type filter.allow)) filter.allow)
        deny (and (= :table (type filter)) (= :table (type filter.deny)) filter.deny)
        servers (let [s (and session (session.current) (session.get :mcp-servers))]
                  (when (= :table (type s)) s))]
    (if (not (or allow deny servers))
        entries
        (icollect [_ e (ipairs entries)]
          (when (and (or (not allow) (listed? allow e.name)) (not (and deny (listed? deny e.name)))
                     (or (not servers) (not e.mcp) (listed? servers e.mcp.server)))
            e)))))

(fn agent.commands []
  "The slash commands: documented functions in the tables named by `agent.command-tables`, as
entries {:name :fn :table} sorted by name (skills.fnl adds the markdown commands)."
  (documented-fns agent.command-tables))

(fn agent.find-tool [name]
  "The tool entry called NAME, looked up now, or nil."
  (find-entry (agent.tools) name))

(fn agent.find-command [name]
  "The command entry called NAME, looked up now, or nil."
  (find-entry (agent.commands) name))

(fn arglist-keys [f]
  "The keys destructured by F's first parameter, in source order."
  (let [arglist (meta f :fnl/arglist)
        out []]
    (when (and arglist (. arglist 1))
      (let [(ok parsed ast) (pcall #((fennel.parser (. arglist 1))))]
        (when (and ok parsed (= :table (type ast)) (not (fennel.sym? ast)) (not (fennel.sequence? ast)))
          (let [mt (getmetatable ast)
                ks (or (and mt mt.keys)
                       (let [ks (icollect [k (pairs ast)] (when (= :string (type k)) k))]
                         (table.sort ks) ks))]
            (each [_ k (ipairs ks)]
              (when (and (= :string (type k)) (not (k:match "^&")))
                (table.insert out k)))))))
    out))

(fn agent.tool-schema [f]
  "The JSON schema of the tool F's arguments: each key its first parameter destructures is a
required string, unless `:params {key [type description & flags]}` metadata says otherwise
(flag :optional; a table flag is more of the key's schema, such as an array's {:items …}).
Keys listed only in :params are added."
  (let [params (or (meta f :params) {})
        keys (arglist-keys f)
        seen (collect [_ k (ipairs keys)] k true)
        extra (icollect [k (pairs params)] (when (not (. seen k)) k))
        props {}
        required []]
    (table.sort extra)
    (each [_ k (ipairs extra)] (table.insert keys k))
    (each [_ k (ipairs keys)]
      (let [spec (. params k)
            ty (or (and spec (. spec 1)) :string)
            desc (and spec (. spec 2))
            optional (and spec (accumulate [o false i flag (ipairs spec)]
                                 (or o (and (> i 2) (= flag :optional)))))]
        (tset props k (let [prop (if desc {:type ty :description desc} {:type ty})]
                        (each [i flag (ipairs (or spec []))]
                          (when (and (> i 2) (= :table (type flag)))
                            (each [fk fv (pairs flag)] (tset prop fk fv))))
                        prop))
        (when (not optional) (table.insert required k))))
    {:type :object
     :properties (if (next props) props (json.object))
     :required (json.array (table.unpack required))}))

;; Tool specs by tool function (weak keys): building one parses the arglist and the docstring,
;; about a quarter of a millisecond, and every request needs every tool's. A function's
;; metadata is fixed when it is defined, and a redefinition or an advice makes a new function,
;; so the spec of a function never goes stale.
(local spec-cache (setmetatable {} {:__mode :k}))

(fn agent.tool-spec [entry]
  "What the model is told about the tool ENTRY: {:name :description :parameters}. Computed once
per tool function (a redefinition or an advice makes a new one) and returned as a fresh table
whose :parameters is shared: treat it as read-only. A tool whose `:describe` metadata is a
function gets the string it returns (now) as its description; an entry's own :spec (MCP) is
used as it is."
  (let [cached (or entry.spec (. spec-cache entry.fn))
        spec (if (and cached (= cached.name entry.name))
                 cached
                 (let [fresh {:name entry.name
                              :description (oml.doc-text (meta entry.fn :fnl/docstring))
                              :parameters (agent.tool-schema entry.fn)}]
                   (tset spec-cache entry.fn fresh)
                   fresh))]
    {:name spec.name :parameters spec.parameters
     :description (let [describe (meta entry.fn :describe)
                        (ok d) (if (= :function (type describe)) (pcall describe) (values false))]
                    (if (and ok (= :string (type d))) d spec.description))}))
