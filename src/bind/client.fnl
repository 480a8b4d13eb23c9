;; The Lisp side of the `client` namespace (src/bind/client.rs): the wrappers that raise error
;; tables, named agents, `client.spawn` and `client.join`.
;;
;; Compiled to bytecode by build.rs. src/bind/client.rs runs the chunk with the `client` table,
;; the raw host functions (which return true and the values, or false and an error table),
;; `spawn` and `wait`; the chunk returns the metatable of the error tables. See
;; docs/src/acp-client.md and docs/src/agents.md.

(local (client raw spawn wait) ...)
(local oml _G.oml)
(local fennel (require :fennel))

(defsetting acp.protocol-versions [1] :table
  "The ACP versions `oml acp` and `client.connect` offer: [1] (the default) or [1 2], which adds the v2 draft of 2026-07-15: `oml acp` answers 2 to a client that asks for it, and `client.connect` asks for 2 and speaks it when the agent answers 2. Version 1 is always spoken. Read when a connection is initialized.")
(defsetting client.default-agent nil :string?
  "The name of the agent (client.defagent) that (client.connect) with no command starts.")

(local error-mt
       {:__name :acp-error
        :__tostring (fn [e]
                      (.. "ACP " (tostring e.category) " error: " (tostring e.message)
                          (if e.code (.. " (code " (tostring e.code) ")") "")))})

(fn config-error [message data]
  (setmetatable {:category :config : message : data} error-mt))

(fn wrap [f]
  "A function that calls F and returns its values after the first, or raises its error value."
  (let [wrapped (fn [...]
                  (let [r (table.pack (f ...))]
                    (if (. r 1)
                        (table.unpack r 2 r.n)
                        (error (. r 2) 0))))]
    (tset fennel.metadata wrapped (. fennel.metadata f))
    wrapped))

(each [name f (pairs raw)]
  (tset client name (wrap f)))

(fn client.spawn [f ...]
  "Run (F ...) in a coroutine of its own, concurrently; returns a handle for client.join."
  (let [args (table.pack ...)]
    (spawn (fn [] (table.pack (pcall f (table.unpack args 1 args.n)))))))

(fn client.join [handle]
  "Wait for the coroutine of HANDLE (from client.spawn) and return its values, or raise its
error (the same value, so error tables keep their :category)."
  (let [r (wait handle)]
    (if (. r 1)
        (table.unpack r 2 r.n)
        (error (. r 2) 0))))

(set client.agents (or client.agents {}))

(fn client.defagent [id cfg]
  "Define the agent named ID, started by (client.connect ID): CFG is {:command \"/path\" :args
[...] :env {...}}. Returns ID. A bad ID or CFG is an error."
  (when (or (not= :string (type id)) (= id ""))
    (error "client.defagent: the first argument is the agent's name, a string" 2))
  (when (or (not= :table (type cfg)) (not= :string (type cfg.command)))
    (error "client.defagent: expected (client.defagent :name {:command \"/path\" :args [...] :env {...}})" 2))
  (let [args [] env {}]
    (each [i a (ipairs (or cfg.args []))]
      (when (not= :string (type a)) (error "client.defagent: :args are strings" 2))
      (tset args i a))
    (each [k v (pairs (or cfg.env {}))] (tset env k v))
    (tset client.agents id {:command cfg.command : args : env})
    id))

(fn default-agent []
  (let [id (oml.setting "client.default-agent")]
    (when (= nil id)
      (let [(message text) (_G.catalog.missing-default-message)]
        (error (config-error message {:fennel text}) 0)))
    (when (= nil (. client.agents id))
      (error (config-error (.. "client.default-agent is " id ", but no agent of that name is defined; "
                               "add (client.defagent :" id " {:command \"/path/to/agent\" :args [...]}) "
                               "(`oml agents` prints one for each agent found on PATH)")
                           {:agent id})
             0))
    id))

(fn catalog-agent [name]
  "How to start the catalog agent NAME when it is on PATH; nil when the catalog has no NAME; a
:config error when it has it but it is not installed."
  (let [catalog _G.catalog
        entry (and catalog (not (name:find "/")) (catalog.find name))]
    (when entry
      (or (catalog.command name)
          (error (config-error (.. "the agent " name " (" entry.name ") is not installed: none of "
                                   (table.concat entry.commands ", ") " is on PATH")
                               {:agent name})
                 0)))))

(fn client.resolve-agent [what]
  "How (client.connect WHAT) starts the agent named WHAT: {:command … :args [...] :env {...}},
from client.defagent, else the catalog (when it is on PATH); nil is client.default-agent. A
name that is neither raises a :config error naming the defined agents. `oml ask` and
client.ask start their session owners with it."
  (let [what (if (= nil what) (default-agent) what)
        cfg (or (. client.agents what) (catalog-agent what))]
    (when (= nil cfg)
      (let [names (icollect [k (pairs client.agents)] k)]
        (table.sort names)
        (error (config-error (.. "no agent named " what " is defined (client.agents: "
                                 (if (< 0 (length names)) (table.concat names ", ") "none")
                                 ") and the catalog has none (`oml agents`)")
                             {:agent what})
               0)))
    {:command cfg.command :args (or cfg.args []) :env (or cfg.env {})}))

(fn options-table? [t]
  (and (= :table (type t)) (not= nil (next t)) (= nil (. t 1))))

(let [connect-command client.connect]
  (fn client.connect [what args opts]
    "Start an ACP agent and negotiate; returns the connection. WHAT is the name of an agent
defined with client.defagent, or of a catalog agent found on PATH (`oml agents`; \"oml\" is oml
itself): ARGS are then the options, whose :env adds to the agent's. nil is client.default-agent.
Anything else is a command: then ARGS are its arguments (a sequence of strings) and OPTS the
options: :env (extra variables), :cwd (the agent's directory), :on-permission (the permission
handler), :on-elicitation (answers the agent's elicitation/create, called with its params as on
the wire and returning {:action :accept :content {...}}, {:action :decline} or {:action :cancel};
with it the client offers form and URL elicitation), :fs and :terminal (true or a handler: the
client serves the agent's fs/* and terminal/*, held to the session's folders, commands in oml's
sandbox), :on-update (the connection's update callback), :request-timeout and :startup-timeout
(seconds), :authenticate? (default true: authenticate by itself with an environment-variable
method whose variables are set). A URL (http(s)://…/acp or ws://…) is a remote agent, with the
token from :token, :token-file or $OML_ACP_TOKEN. (tostring conn) names the agent and its pid
(or URL), (conn:pid) gives the pid (nil for a URL). Failure raises an error table {:category :message :code :data}: a name that is neither
defined nor a program fails at once, and without a default agent a :config error says what to add."
    (let [what (if (= nil what) (default-agent) what)
          _ (when (not= :string (type what))
              (error (config-error "client.connect: the first argument is an agent's name or a command, a string" {}) 0))
          cfg (or (. client.agents what) (catalog-agent what))]
      (if (= nil cfg)
          (if (options-table? args)
              (let [names (icollect [k (pairs client.agents)] k)]
                (table.sort names)
                (error (config-error (.. "no agent named " what " is defined (client.agents: "
                                         (if (< 0 (length names)) (table.concat names ", ") "none")
                                         "); to run a command, give its arguments as a list: "
                                         "(client.connect \"/path/to/agent\" [args] opts)")
                                     {:agent what})
                       0))
              (connect-command what args opts))
          ;; By name, the second argument is the options.
          (let [o {} env {}]
            (each [k v (pairs (or args {}))] (tset o k v))
            (each [k v (pairs (or cfg.env {}))] (tset env k v))
            (each [k v (pairs (or (. (or args {}) :env) {}))] (tset env k v))
            (set o.env env)
            (connect-command cfg.command (or cfg.args []) o))))))
error-mt
