;; The terminal chat's Lisp side: how a tool card, the status line after a turn, the welcome and
;; the permission question look, and the chat's own commands.
;;
;; Loaded only by the chat (`oml` on a terminal, or with lines piped in), after the agent and
;; before the init files, so that an init file can redefine or advise every function here. The
;; host (src/front/chat/surface.rs) has put `chat.ask-key!`, `chat.color?`, `chat.width`,
;; `chat.diff-lines`, `chat.clean`, `chat.request!` and `chat.stored-sessions` in place. The
;; front end (src/front/chat/) calls `chat.card-header`, `chat.card-body`, `chat.status-line`,
;; `chat.welcome` and `chat.permission-question` by name each time; the streamed text itself is
;; drawn in Rust.

(local oml _G.oml)
(local fennel (require :fennel))
(local chat _G.chat)
(local agent _G.agent)
(local session _G.session)
(local commands _G.commands)

(local file "src/front/chat/chat.fnl")

(defsetting chat.show-reasoning? false :boolean
  "Show the model's reasoning in full (dimmed) as it streams; otherwise it is folded to one line.")
(defsetting chat.tool-output-lines 5 :integer
  "Lines of a running command's output shown live under its card; 0 shows none.")
(defsetting chat.result-lines 4 :integer
  "Lines of a finished tool's output shown under its card.")
(defsetting chat.diff-max-lines 40 :integer
  "Lines of an edit's diff shown under its card and in the permission question.")
(defsetting chat.line-max-chars 1000 :integer
  "Characters of one line shown in a diff, a tool's output or a permission question's arguments; the rest is counted (\"… N more characters\"). A command to run is always shown whole.")
(defsetting chat.history-size 1000 :integer
  "Inputs kept in the chat's history file (shared by every directory).")
(defsetting chat.theme
  {:dim "2" :bold "1" :italic "3" :code "36" :heading "1;35" :ok "32" :error "31"
   :running "33" :added "32" :removed "31" :hunk "36" :prompt "1;36" :question "1;33"}
  :table
  "SGR codes of each style the chat draws with (see `chat.style`); NO_COLOR or TERM=dumb draw none.")

(fn chat.style [name text]
  "TEXT drawn in the style NAME of `chat.theme` (:dim, :bold, :ok, :error, :added, ...), or
TEXT itself when the chat draws without colour or the theme has no such style."
  (let [code (and (chat.color?) (. chat.theme name))]
    (if code (.. "\027[" code "m" text "\027[0m") text)))

;;; Tool cards

(fn first-line [s]
  (or (and (= :string (type s)) (s:match "^[^\n]*")) ""))

(fn chat.card-title [event]
  "The title of the card of the tool call EVENT (a tool-start or tool-end event with :name
:args :title): the command of bash, \"Edit path\" for edit and write, else the tool's title."
  (let [args (or event.args {})]
    (case event.name
      :bash (.. "$ " (first-line (chat.clean (or args.command ""))))
      :edit (.. "Edit " (chat.clean (or args.path "")))
      :write (.. "Write " (chat.clean (or args.path "")))
      _ (chat.clean (if (and (= :string (type event.title)) (event.title:find "%S"))
                        event.title
                        ;; A card whose start was drawn by an earlier turn (a background
                        ;; task's) ends with neither.
                        (or event.name "tool"))))))

(fn exit-status [exit]
  "How the command of a tool-end event ended, from its EXIT data, in a few words; nil without."
  (when (= :table (type exit))
    (if exit.code (.. "exit " exit.code)
        exit.signal (.. "killed by " exit.signal)
        (. exit :timed-out) "timeout"
        exit.cancelled "cancelled")))

(fn chat.card-header [event status]
  "The first line of the card of the tool call EVENT in STATUS (:running, :ok or :failed): a mark,
the title, and for a finished command how it ended (the event's :exit)."
  (let [title (chat.card-title event)
        ended (exit-status event.exit)]
    (case status
      :running (.. (chat.style :running "●") " " (chat.style :bold title))
      :ok (.. (chat.style :ok "✓") " " (chat.style :bold title)
              (if ended (chat.style :dim (.. "  " ended)) ""))
      _ (.. (chat.style :error "✗") " " (chat.style :bold title)
            (if ended (chat.style :error (.. "  " ended)) "")))))

(fn chat.clip [line ?max]
  "LINE cleaned of control characters (`chat.clean`) and cut to ?MAX characters (default
`chat.line-max-chars`), the rest said as a dim \"… N more characters\"."
  (let [max (math.max 0 (math.floor (or ?max chat.line-max-chars)))
        chars (utf8.len line)
        n (or chars (length line))]
    (if (<= n max)
        (chat.clean line)
        (let [cut (if chars (- (utf8.offset line (+ max 1)) 1) max)]
          (.. (chat.clean (line:sub 1 cut))
              (chat.style :dim (.. " … " (- n max) " more characters")))))))

(fn clip-lines [text]
  "TEXT with each of its lines cut by `chat.clip`."
  (table.concat (icollect [l (string.gmatch (.. text "\n") "([^\n]*)\n")] (chat.clip l)) "\n"))

(fn chat.diff-text [old new ?max]
  "The unified diff of OLD and NEW, coloured, at most ?MAX lines (default `chat.diff-max-lines`)."
  (let [lines (chat.diff-lines old new)
        max (or ?max chat.diff-max-lines)
        out []]
    (each [i line (ipairs lines) &until (> i max)]
      (table.insert out
        (case (line:sub 1 1)
          "+" (if (= "+++" (line:sub 1 3)) nil (chat.style :added (chat.clip line)))
          "-" (if (= "---" (line:sub 1 3)) nil (chat.style :removed (chat.clip line)))
          "@" (chat.style :hunk line)
          "\\" nil
          _ (chat.clip line))))
    (when (> (length lines) max)
      (table.insert out (chat.style :dim (.. "… " (- (length lines) max) " more lines"))))
    (table.concat out "\n")))

(fn head-lines [text n]
  (let [out []
        all (icollect [l (string.gmatch (.. text "\n") "([^\n]*)\n")] l)]
    (each [i l (ipairs all) &until (> i n)]
      (table.insert out (chat.style :dim (.. "  " (chat.clip l)))))
    (when (> (length all) n)
      (let [more (- (length all) n)]
        (table.insert out (chat.style :dim (.. "  … " more (if (= more 1) " more line" " more lines"))))))
    (table.concat out "\n")))

(fn chat.card-body [event]
  "What is shown under the card of the finished tool call EVENT (a tool-end with :content
:error? :diff): the coloured diff of an edit or write, else the first `chat.result-lines` lines of
its output; nil for nothing. Each line is cut to the terminal's width where it is drawn, so style
each line on its own."
  (if (and (= :table (type event.diff)) (not (. event :error?)))
      (chat.diff-text (. event.diff :old-text) (. event.diff :new-text))
      (let [text (or event.content "")]
        (when (and (text:find "%S") (< 0 chat.result-lines))
          (head-lines (text:gsub "%s+$" "") chat.result-lines)))))

;;; The plan

(fn chat.render-plan [entries]
  "The model's plan ENTRIES (ACP PlanEntry objects {:content :status}) as a checklist: ☑ done
(dimmed), ◐ in progress (bold), ☐ pending."
  (table.concat
    (icollect [_ e (ipairs entries)]
      (let [step (chat.clean (or e.content ""))]
        (case e.status
          :completed (chat.style :dim (.. "  ☑ " step))
          :in_progress (.. "  " (chat.style :running "◐") " " (chat.style :bold step))
          _ (.. "  ☐ " step))))
    "\n"))

;;; After a turn

(fn short-count [n]
  (if (>= n 1000000) (string.format "%.1fM" (/ n 1000000))
      (>= n 10000) (string.format "%.0fk" (/ n 1000))
      (>= n 1000) (string.format "%.1fk" (/ n 1000))
      (tostring (math.floor n))))

(fn chat.status-items [info]
  "The items of the status line after a turn, from INFO {:tokens :context :window :seconds
:model :stop-reason}: tokens used, context fill, duration, and why the turn stopped when it was
not the end of the turn. Add an item by advising this."
  (let [items []]
    (when (and info.tokens (< 0 info.tokens))
      (table.insert items (.. (short-count info.tokens) " tokens")))
    (when (and info.context info.window (< 0 info.window))
      (table.insert items (string.format "context %d%% of %s"
                                         (math.floor (+ 0.5 (* 100 (/ info.context info.window))))
                                         (short-count info.window))))
    (when info.seconds
      (table.insert items (string.format "%.1fs" info.seconds)))
    (when (and info.stop-reason (not= info.stop-reason :end-turn))
      (table.insert items (.. "stopped: " info.stop-reason)))
    items))

(fn chat.status-line [info]
  "The dimmed line shown after each turn: `chat.status-items` joined with \" · \", or nil."
  (let [items (chat.status-items info)]
    (when (< 0 (length items))
      (chat.style :dim (table.concat items " · ")))))

(fn chat.welcome [info]
  "The lines shown when the chat opens, from INFO {:version :model :cwd :session :resumed}:
the model (or how to configure one) and the input rules."
  (let [model (if info.model (.. "model " info.model)
                  "no model yet: set OPENAI_MODEL and OPENAI_BASE_URL (or llm.model in ~/.config/oml/init.fnl)")]
    (.. (chat.style :bold (.. "oml " info.version)) "  " (chat.style :dim (.. model " · " info.cwd))
        (if info.resumed (.. "\n" (chat.style :dim (.. "resumed session " info.session))) "")
        "\n" (chat.style :dim "Ask anything · (form) is Fennel · /commands · ,help for keys · Ctrl-D exits"))))

;;; The permission question

(fn change-preview [call]
  (let [(diff why) (oml.preview-change call.name (or call.args {}))]
    (if diff
        (.. (if (. diff :old-text) "" (chat.style :dim "(a new file)\n"))
            (chat.diff-text (or (. diff :old-text) "") (. diff :new-text)))
        (chat.style :error (.. "It would fail: " (chat.clean (or why "")))))))

(fn delegated-preview [call]
  (let [args (or call.args {})
        command (if (= :string (type args.command)) args.command
                    (= :table (type args.command)) (table.concat args.command " "))
        out []]
    (when command (table.insert out (chat.style :bold (chat.clean command))))
    (each [_ c (ipairs (if (= :table (type call.content)) call.content []))]
      (when (= c.type :diff)
        (table.insert out (.. (chat.style :dim (chat.clean (or c.path ""))) "\n"
                              (chat.diff-text (if (= :string (type c.oldText)) c.oldText "")
                                              (or c.newText ""))))))
    (if (< 0 (length out)) (table.concat out "\n") (clip-lines (fennel.view args)))))

(fn chat.permission-question [call]
  "The question asked before the tool CALL {:name :args :kind} runs: what exactly it would do
(the whole command and its directory, or the diff an edit or write would make; for a delegated
agent's request, its command and proposed diffs; for an MCP tool, its server, whether the server
marks it destructive, and the arguments) and the keys."
  (let [args (or call.args {})
        what (case (if call.delegate :delegate call.mcp :mcp call.name)
               :delegate (.. (chat.style :question (.. (chat.clean call.title) "?")) "\n"
                             (delegated-preview call))
               :bash (.. (chat.style :question "Run this command?") "  "
                         (chat.style :dim (.. "in " (session.cwd))) "\n"
                         (chat.style :bold (chat.clean (or args.command ""))))
               :edit (.. (chat.style :question (.. "Edit " (chat.clean (or args.path "")) "?")) "\n"
                         (change-preview call))
               :write (.. (chat.style :question (.. "Write " (chat.clean (or args.path "")) "?")) "\n"
                          (change-preview call))
               :mcp (.. (chat.style :question (.. "Call " (chat.clean call.mcp.tool) " of the MCP server "
                                                   (chat.clean call.mcp.server) "?"))
                        (if call.mcp.destructive?
                            (chat.style :dim "  the server marks it destructive")
                            "")
                        "\n" (chat.clip (json.encode args)))
               _ (.. (chat.style :question (.. "Allow " call.name "?")) "\n"
                     (clip-lines (fennel.view args))))]
    (.. what "\n" (chat.style :bold "[y]") " yes (Enter)  "
        (chat.style :bold "[a]") " always: " (chat.clean (agent.describe-rule (agent.permission-rule call)))
        "  " (chat.style :bold "[n]") " no")))

(fn agent.ask-permission [request]
  "Ask at the terminal whether the tool call REQUEST {:id :name :args :kind} may run: the
question `chat.permission-question` makes, answered with y (allow once; Enter too), a (always, for
this session) or n (reject). Ctrl-C or Esc cancels the turn; with nobody at a terminal (piped
stdin) it cannot ask, and the call is refused with the reason."
  (case (chat.ask-key! (chat.permission-question request) "yan")
    :y :allow-once
    :a :allow-always
    :n :reject-once
    false :cannot-ask
    _ :cancelled))

;;; The chat's commands

(fn commands.new [input]
  {:fnl/docstring "Start a new session in this directory (the chat only)."}
  (chat.request! :new)
  "Starting a new session.")

(fn commands.sessions [input]
  {:fnl/docstring "List the stored sessions of this directory, latest first (all: of every directory)."
   :hint "[all]"}
  (let [list (chat.stored-sessions (= input :all))]
    (if (= 0 (length list))
        "No stored sessions."
        (.. (table.concat (icollect [i s (ipairs list) &until (> i 20)]
                            (.. "- `" s.id "` " (or s.updated "") "  " (or s.title "")))
                          "\n")
            "\n\n/resume ID goes on with one."))))

(fn commands.resume [input]
  {:fnl/docstring "Go on with a stored session (the chat only); without an id, the latest conversation of this directory."
   :hint "[session id]"}
  (let [id (if (= input "")
               ;; The latest that holds a conversation (an empty session has no title).
               (accumulate [found nil _ s (ipairs (chat.stored-sessions)) &until found]
                 (and s.title s.id))
               input)]
    (if (not id) "No stored session to resume."
        (= id (session.current)) "This is that session."
        (do (chat.request! :resume id)
            (.. "Resuming " id ".")))))

(fn commands.fork [input]
  {:fnl/docstring "Start a new session from this one, with its whole history or what came before prompt N, and go on in it (the chat only); the session left stays as it is."
   :hint "[N]"}
  (let [n (tonumber input)]
    (if (and (not= "" input) (not n))
        "Usage: /fork [N]"
        (let [from (session.current)
              id (session.fork n)]
          (chat.request! :resume id)
          (.. "Forked as " id (if n (.. ", with the history before prompt " n) "")
              "; going on in the fork. /resume " from " goes back.")))))

;;; Asking the user: a question with a few choices, answered by a key

(fn single-choice [schema]
  ;; The field and its choices when SCHEMA is one field with at most nine choices.
  (let [props (and (= :table (type schema)) schema.properties)
        names (icollect [k (pairs (or props {}))] k)
        field (. names 1)
        choices (and field (. props field :enum))]
    (when (and (= 1 (length names)) (= :table (type choices)) (< 0 (length choices) 10))
      (values field choices))))

(fn chat.ask-user [request]
  "Put REQUEST (see `agent.ask-user`) to the person at the terminal when it is one question with
at most nine choices: the message, the choices numbered, one key. Returns the answer, or nil and
the reason when the question is of another shape or nobody is at the terminal."
  (let [(field choices) (single-choice request.schema)]
    (if (not field)
        (values nil "the chat asks only questions with at most nine choices")
        (let [lines (icollect [i c (ipairs choices)] (.. "  " i ") " (tostring c)))
              keys (table.concat (icollect [i (ipairs choices)] (tostring i)))
              key (chat.ask-key! (.. (or request.message "") "\n" (table.concat lines "\n")) keys)]
          (case key
            false (values nil "nobody is at the terminal")
            nil {:action :cancel}
            k {:action :accept :content {field (. choices (tonumber k))}})))))

(oml.advise* "agent.ask-user" :chat
  (fn [ask-user request]
    (let [(answer why) (chat.ask-user request)]
      (if answer answer (values nil why)))))

(oml.advise* "agent.can-ask-user?" :chat
  (fn [_can-ask?] true))
