;; The `proxy` namespace of `oml proxy`: every message between the editor and the agent passes
;; through these named steps, which user code redefines or advises while the proxy runs (the
;; init file, the live REPL). See docs/src/proxy.md.
;;
;; Compiled to bytecode by build.rs; src/front/proxy/surface.rs runs it with the `proxy` table
;; holding the host functions (proxy.request, proxy.notify).

(local proxy ...)
(local oml _G.oml)
(local json _G.json)

(set proxy.methods
     {"initialize" :on-initialize
      "session/new" :on-new-session
      "session/load" :on-load-session
      "session/prompt" :on-prompt
      "session/cancel" :on-cancel
      "session/update" :on-update
      "session/request_permission" :on-permission
      "fs/read_text_file" :on-read-file
      "fs/write_text_file" :on-write-file})

(set proxy.answering {:on-permission true})

(fn proxy.to-agent [msg]
  "Every message from the editor to the agent, whole (jsonrpc, id, method, params, result or
error, as on the wire): returns the message to forward, or nil to drop it (a dropped request is
answered with an error). The identity by default."
  msg)

(fn proxy.to-client [msg]
  "Every message from the agent to the editor, whole: returns the message to forward, or nil to
drop it. The identity by default."
  msg)

(fn same [params] params)

(fn proxy.on-initialize [params]
  "The editor's initialize params (protocolVersion, clientCapabilities, clientInfo): returns
the params to forward."
  (same params))

(fn proxy.on-new-session [params]
  "session/new's params (cwd, mcpServers): returns the params to forward."
  (same params))

(fn proxy.on-load-session [params]
  "session/load's params: returns the params to forward."
  (same params))

(fn proxy.on-prompt [params]
  "session/prompt's params (sessionId, prompt: the content blocks): returns the params to
forward."
  (same params))

(fn proxy.on-cancel [params]
  "session/cancel's params: returns the params to forward."
  (same params))

(fn proxy.on-update [params]
  "A session/update from the agent (sessionId, update): returns the params to forward."
  (same params))

(fn proxy.on-read-file [params]
  "fs/read_text_file from the agent: returns the params to forward to the editor."
  (same params))

(fn proxy.on-write-file [params]
  "fs/write_text_file from the agent: returns the params to forward to the editor."
  (same params))

(fn proxy.on-permission [params ask-editor]
  "session/request_permission from the agent (sessionId, toolCall, options): returns the
answer the agent gets, in wire form ({:outcome {:outcome \"selected\" :optionId id}} or
{:outcome {:outcome \"cancelled\"}}). By default (ASK-EDITOR params) asks the editor; advice
that returns without calling it answers the agent itself."
  (ask-editor params))

(fn proxy.dispatch [direction msg forward]
  "How one message goes through the steps (called by the proxy for each message; DIRECTION is
:to-agent or :to-client): the whole-message step, then the method's step. Returns the message
to forward (or nil), and for an answering step the answer for the sender."
  (let [whole (. proxy direction)
        msg (whole msg)
        step-name (and msg msg.method (. proxy.methods msg.method))
        step (and step-name (. proxy step-name))]
    (if (not step) msg
        (. proxy.answering step-name) (values nil {:result (step msg.params forward)})
        (do (set msg.params (step msg.params)) msg))))

;; Recipes: each installs advice under its own key, so calling it again replaces it, and
;; (unadvise! proxy.on-prompt :context) removes it.

(set proxy.recipes {})

(fn proxy.recipes.add-context [text]
  "Add TEXT (project instructions, a reminder) as a text block before every prompt."
  (oml.advise* "proxy.on-prompt" :context
           (fn [original params]
             (table.insert params.prompt 1 {:type :text : text})
             (original params))))

(fn proxy.recipes.add-mcp-servers [servers]
  "Add SERVERS (ACP McpServer tables) to every session/new and session/load."
  (each [_ step (ipairs [:on-new-session :on-load-session])]
    (oml.advise* (.. "proxy." step) :mcp-servers
                 (fn [original params]
                   (set params.mcpServers (or params.mcpServers []))
                   (each [_ s (ipairs servers)] (table.insert params.mcpServers s))
                   (original params)))))

(fn option-of [params kinds]
  (accumulate [found nil _ o (ipairs params.options) &until found]
    (when (. kinds o.kind) o.optionId)))

(fn proxy.recipes.policy [opts]
  "Answer permission requests by a policy: tool kinds in OPTS.allow (default [:read :search])
are allowed, a request whose raw input contains one of OPTS.refuse (default [\"rm -rf\"]) is
rejected, and anything else is asked of the editor."
  (let [allow (collect [_ k (ipairs (or opts.allow [:read :search]))] k true)
        refuse (or opts.refuse ["rm -rf"])]
    (oml.advise* "proxy.on-permission" :policy
             (fn [original params ask-editor]
               (let [input (json.encode (or params.toolCall.rawInput {}))
                     refused (accumulate [r false _ p (ipairs refuse)] (or r (not= nil (input:find p 1 true))))
                     kind params.toolCall.kind]
                 (if refused
                     (case (option-of params {:reject_once true :reject_always true})
                       id {:outcome {:outcome :selected :optionId id}}
                       _ {:outcome {:outcome :cancelled}})
                     (. allow kind)
                     (case (option-of params {:allow_once true :allow_always true})
                       id {:outcome {:outcome :selected :optionId id}}
                       _ (original params ask-editor))
                     (original params ask-editor)))))))

(fn redact-value [v patterns]
  (case (type v)
    :string (accumulate [s v _ p (ipairs patterns)] (pick-values 1 (s:gsub p "[REDACTED]")))
    :table (do (each [k x (pairs v)] (tset v k (redact-value x patterns))) v)
    _ v))

(fn proxy.recipes.redact [patterns]
  "Replace every match of the Lua PATTERNS (say \"sk%-%w+\") with [REDACTED] in every string
of every message, both ways."
  (each [_ step (ipairs [:to-agent :to-client])]
    (oml.advise* (.. "proxy." step) :redact
                 (fn [original msg] (original (redact-value msg patterns))))))

(fn proxy.recipes.log [path]
  "Append every message, both ways, to PATH as NDJSON: {\"dir\": \"to-agent\"|\"to-client\",
\"msg\": …} per line."
  (let [f (assert (io.open path :a))]
    (f:setvbuf :line)
    (each [_ step (ipairs [:to-agent :to-client])]
      (oml.advise* (.. "proxy." step) :log
                   (fn [original msg]
                     (f:write (json.encode {:dir step : msg}) "\n")
                     (original msg))))))

proxy
