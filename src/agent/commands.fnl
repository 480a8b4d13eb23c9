;; The built-in slash commands: documented functions in the `commands` table (the tables named
;; by `agent.command-tables` are searched, later ones winning). Each takes the text after the
;; command name and returns what to show; what it prints is shown too. Loaded after agent.fnl.

(local oml _G.oml)
(local fennel (require :fennel))
(local agent _G.agent)
(local project _G.project)
(local commands _G.commands)
(local session _G.session)
(local json _G.json)

(fn meta [f key] (when f (fennel.metadata:get f key)))

;;; Commands

(fn commands.doc [input]
  {:fnl/docstring "Show the documentation of a function, setting, tool or command."
   :hint "name, e.g. agent.max-turns or run-tool-call"}
  (if (= input "") "Usage: /doc NAME"
      (let [text (oml.describe input)]
        (if (text:match "^Nothing named ") (.. "No var named " input)
            ;; Markdown: the signature as code, the text as it is (clients render it).
            (let [(head rest) (text:match "^([^\n]*)\n?(.*)$")
                  body (pick-values 1 (-> rest (: :gsub "^  " "") (: :gsub "\n  " "\n")))]
              (.. "`" head "`\n\n" body))))))

(fn commands.apropos [input]
  {:fnl/docstring "List the documented functions and settings whose name matches a pattern."
   :hint "pattern"}
  (let [found (oml.apropos-list input)]
    (if (= 0 (length found))
        (.. "Nothing matches \"" input "\"")
        (table.concat (icollect [_ m (ipairs found)] (.. "- `" m.name "` " (or m.summary ""))) "\n"))))

(fn commands.source [input]
  {:fnl/docstring "Show where a function or setting is defined, and its source."
   :hint "name"}
  (let [src (oml.source-of input)]
    (if (not src) (.. "No source for " input)
        ;; Markdown: where it is, then the source in a fenced block.
        (let [(place code) (src:match "^([^\n]*)\n(.*)$")]
          (if place (.. place "\n\n```fennel\n" code "\n```") src)))))

(fn commands.eval [input]
  {:fnl/docstring "Evaluate Fennel forms in this session and show the value of the last one."
   :hint "forms, e.g. (+ 1 2)"}
  (let [f (oml.compile-string input "/eval")]
    (f)))

(fn commands.reload [input]
  {:fnl/docstring "Load the user init file again, and the project init file when it is allowed to run."}
  (if (= :function (type oml.reload))
      (oml.reload (session.cwd))
      "Reloading is not available in this mode."))

(fn commands.settings [input]
  {:fnl/docstring "List every setting with its value (secrets hidden)."}
  (table.concat (icollect [_ s (ipairs (oml.settings-list))] (.. "- `" s.name "` = `" s.value "`")) "\n"))

(fn commands.tools [input]
  {:fnl/docstring "List the tools the model can call."}
  (table.concat (icollect [_ e (ipairs (agent.tools))]
                  (.. "- `" e.name "` (" e.table "." e.name ") " (oml.summary (meta e.fn :fnl/docstring))))
                "\n"))

(fn commands.commands [input]
  {:fnl/docstring "List the slash commands."}
  (table.concat (icollect [_ e (ipairs (agent.commands))]
                  (.. "- `/" e.name "` " (oml.summary (meta e.fn :fnl/docstring))))
                "\n"))

(fn commands.model [input]
  {:fnl/docstring "Show the model of this session, or switch this session to another model."
   :hint "model id (empty: show the current one)"}
  (if (= input "")
      (.. "Model: " (or (agent.current-model) "none"))
      (do (session.put! :model input)
          (.. "Model set to " input " for this session"))))

(fn commands.mode [input]
  {:fnl/docstring "Show this session's permission mode and the modes there are, or switch this session to another (as the editor's mode picker does)."
   :hint "ask, accept-edits, yolo or read-only (empty: list them)"}
  (let [current (agent.current-permission-mode)
        ids (icollect [_ m (ipairs agent.permission-modes)] m.id)
        known? (accumulate [found false _ id (ipairs ids)] (or found (= id input)))]
    (if (= input "")
        (.. "Mode: " current "\n\n"
            (table.concat (icollect [_ m (ipairs agent.permission-modes)]
                            (.. "- `" m.id "`" (if (= m.id current) " (current)" "") ": " m.description))
                          "\n"))
        known? (do (session.put! :permission-mode input)
                   (.. "Mode set to " input " for this session"))
        (.. "Unknown mode " input ": " (table.concat ids ", ")))))

(local apis {:chat true :anthropic true :responses true :gemini true :auto true})

(fn commands.api [input]
  {:fnl/docstring "Show the wire protocol of this session, or switch this session to another (chat, anthropic, responses, gemini, auto)."
   :hint "chat, anthropic, responses, gemini or auto (empty: show the current one)"}
  (if (= input "")
      (.. "Protocol: " (or (agent.current-api) (.. (oml.setting "llm.api") " (llm.api)")))
      (. apis input)
      (do (session.put! :api input)
          (.. "Protocol set to " input " for this session"))
      (.. "Unknown protocol " input ": chat, anthropic, responses, gemini or auto")))

(fn commands.context [input]
  {:fnl/docstring "Show what the system prompt holds and where each part comes from."}
  (let [parts (agent.system-prompt-parts)
        default (table.concat (icollect [_ p (ipairs parts)] p.text) "\n\n")
        prompt (agent.system-prompt)
        chars (fn [s] (or (utf8.len s) (length s)))]
    (if (not= prompt default)
        (.. "agent.system-prompt is redefined; it gives " (chars prompt) " characters:\n\n" prompt)
        (table.concat
          (icollect [_ p (ipairs parts)]
            (.. "## " p.source " (" (chars p.text) " characters)\n\n" p.text))
          "\n\n"))))

(fn commands.usage [input]
  {:fnl/docstring "Show the model calls and tokens of this session."}
  (let [u (session.get :usage)]
    (if (or (= nil u) (= 0 u.calls))
        "No model calls yet."
        (.. u.calls " model calls, " u.prompt_tokens " prompt tokens, "
            u.completion_tokens " completion tokens"))))

(fn commands.compact [input]
  {:fnl/docstring "Summarise the older part of the conversation to free context."
   :hint "[instructions]"}
  (let [n (agent.compact! (if (= "" input) nil input) 0)]
    (if (= 0 n)
        "Nothing to compact."
        (.. "Compacted " n " messages into a summary."))))

;;; MCP servers (the `mcp` namespace is installed after this file, so it is read at call time)

(fn server-line [s]
  (.. "- `" s.name "` " s.state " — " s.transport " `" s.target "`"
      (if (= s.state :running)
          (.. ", " s.tools (if (= 1 s.tools) " tool" " tools")
              (if (and (= :string (type s.info)) (not= "" s.info)) (.. " (" s.info ")") ""))
          "")
      (if (= :string (type s.error)) (.. ": " s.error) "")))

(fn commands.mcp [input]
  {:fnl/docstring "Show this session's MCP servers with their state, tools and errors; `tools` lists their tools, `restart NAME` restarts one."
   :hint "[tools | restart NAME]"}
  (let [mcp _G.mcp
        servers (mcp.servers)
        name (input:match "^restart%s+(%S+)$")]
    (if (= 0 (length servers))
        "No MCP servers in this session. Declare one with `(mcp.defserver name {:command …})` in an init file, or add one in your editor."
        name
        (let [(ok err) (pcall mcp.restart name)]
          (if ok (.. "Restarted `" name "`.") (.. "`" name "` did not restart: " (tostring err))))
        (= input :tools)
        (let [tools (mcp.tools)]
          (if (= 0 (length tools))
              "The MCP servers offer no tools."
              (table.concat (icollect [_ t (ipairs tools)]
                              (.. "- `" t.name "` (" t.kind ") " (mcp.tool-description t)))
                            "\n")))
        (table.concat (icollect [_ s (ipairs servers)] (server-line s)) "\n"))))
