;; The built-in tools: documented functions in the `tools` table, each a thin Lisp face of a
;; Rust host function (`oml.tool-read` ...) with its schema in `:params` metadata and its card's
;; kind and title. Loaded after agent.fnl, which finds them through `agent.tool-tables`.

(local oml _G.oml)
(local agent _G.agent)
(local tools _G.tools)
(local session _G.session)

(fn tools.read [{: path : offset : limit}]
  {:fnl/docstring "Read a text file. Lines are numbered; use offset and limit to page through large files. An image file (PNG, JPEG, GIF, WebP) is shown to you as the image."
   :kind :read :title "Read {path}"
   :params {:path [:string "File path, relative to the working directory or absolute"]
            :offset [:integer "First line to read, 1-based" :optional]
            :limit [:integer "Maximum number of lines to read" :optional]}}
  (if (oml.image-mime (or path ""))
      (agent.read-image path)
      (oml.tool-read (or path "") (tonumber offset) (tonumber limit)
                     _G.tools.read-max-chars _G.tools.read-default-limit)))

(fn tools.write [{: path : content}]
  {:fnl/docstring "Write content to a file, creating parent directories and replacing the file if it exists."
   :kind :edit :title "Write {path}"
   :params {:path [:string "File path, relative to the working directory or absolute"]
            :content [:string "The complete new content of the file"]}}
  (oml.tool-write (or path "") content))

(fn tools.edit [{: path : old_text : new_text : edits &as args}]
  {:fnl/docstring "Replace exact text in a file. old_text must match the file exactly (including whitespace) and be unique. To make several changes in one call, give edits: a list of {old_text, new_text} instead."
   :kind :edit :title "Edit {path}"
   :params {:path [:string "File path, relative to the working directory or absolute"]
            :old_text [:string "Exact text to replace; must be unique in the file" :optional]
            :new_text [:string "Replacement text" :optional]
            :edits [:array "Several replacements, each {old_text, new_text}, applied together" :optional]}}
  (oml.tool-edit (or path "") args))

(fn tools.bash [{: command : timeout : background}]
  {:fnl/docstring "Run a shell command with bash in the working directory. stdout and stderr are merged; long output keeps its end. With background true it runs on while you go on (a dev server, a watcher, a long build): you get a task id at once, task_output reads its output, task_stop ends it, and its result joins the conversation when it ends."
   :kind :execute :title "{command}"
   :params {:command [:string "The command to run"]
            :timeout [:number "Seconds before the command is killed" :optional]
            :background [:boolean "Run it in the background and go on" :optional]}}
  (if (= true background)
      (agent.start-command (or command "") (tonumber timeout))
      (oml.tool-bash (or command "") (or (tonumber timeout) _G.tools.bash-timeout)
                     _G.tools.bash-max-chars)))

(fn tools.grep [{: pattern : path : glob : ignore_case : literal : context : limit &as args}]
  {:fnl/docstring "Search file contents for a regular expression (ripgrep syntax). Matching lines come back as path:line:text, sorted by path; .gitignore'd, hidden and binary files are skipped. Use it to find definitions and uses before reading files."
   :kind :search :title "Grep {pattern}"
   :params {:pattern [:string "Regular expression, e.g. fn\\s+main or TODO"]
            :path [:string "File or directory to search (default: the working directory)" :optional]
            :glob [:string "Only files matching this glob, e.g. *.rs or src/**/*.ts" :optional]
            :ignore_case [:boolean "Match case-insensitively" :optional]
            :literal [:boolean "Treat pattern as a plain string, not a regular expression" :optional]
            :context [:integer "Lines of context before and after each match" :optional]
            :limit [:integer "Result lines to return (default 100)" :optional]}}
  (oml.tool-grep (session.cwd) args _G.tools.grep-ripgrep?))

(fn tools.find [{: pattern : path : limit &as args}]
  {:fnl/docstring "Find files by glob pattern, relative to a directory: * and ? within a name, ** across directories (**/*.rs finds Rust files at any depth). .gitignore'd and hidden files are skipped; paths come back sorted."
   :kind :search :title "Find {pattern}"
   :params {:pattern [:string "Glob, e.g. **/*.rs or src/*.toml"]
            :path [:string "Directory to search (default: the working directory)" :optional]
            :limit [:integer "Paths to return (default 1000)" :optional]}}
  (oml.tool-find (session.cwd) args))

(fn tools.ls [{: path : limit &as args}]
  {:fnl/docstring "List a directory: its entries sorted by name, directories ending in / and symbolic links in @. Hidden entries are listed too."
   :kind :read :title "List {path}"
   :params {:path [:string "Directory (default: the working directory)" :optional]
            :limit [:integer "Entries to return (default 500)" :optional]}}
  (oml.tool-ls (session.cwd) args))
