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

(local file "src/bind/client.fnl")

(fn defsetting [name default typ doc]
  (oml.defsetting* name default {:type typ : doc : file
                                 :line (. (debug.getinfo 2 :l) :currentline)}))

(defsetting "client.default-agent" nil :string?
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

(let [connect-command client.connect]
  (fn client.connect [what args opts]
    "Start an ACP agent and negotiate; returns the connection. WHAT is the name of an agent
defined with client.defagent (ARGS are then the options, whose :env adds to the agent's), nil
for client.default-agent, or a command: then ARGS are its arguments (a sequence of strings) and
OPTS the options: :env (extra variables), :cwd (the agent's directory), :on-permission (the
permission handler), :on-update (the connection's update callback), :request-timeout and
:startup-timeout (seconds). (tostring conn) names the agent and its pid, (conn:pid) gives the
pid. Failure raises an error table {:category :message :code :data}; without a default agent,
a :config error that says what to add."
    (let [what (if (= nil what) (default-agent) what)
          cfg (. client.agents what)]
      (if (= nil cfg)
          (connect-command what args opts)
          ;; By name, the second argument is the options.
          (let [o {} env {}]
            (each [k v (pairs (or args {}))] (tset o k v))
            (each [k v (pairs cfg.env)] (tset env k v))
            (each [k v (pairs (or (. (or args {}) :env) {}))] (tset env k v))
            (set o.env env)
            (connect-command cfg.command cfg.args o))))))
error-mt
