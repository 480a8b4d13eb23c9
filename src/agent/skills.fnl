;; Skills and markdown commands. A skill is a folder with a SKILL.md (found by `project.skills`
;; in the user's and the project's skill folders) or a `skill.def` of Lisp; the model is told
;; each one's name and description in the system prompt and loads its instructions with the
;; `skill` tool when it needs them. A markdown command (`project.prompt-commands`) is a slash
;; command whose file, with its arguments put in, becomes the prompt. Loaded after
;; commands.fnl; `agent.commands` and `agent.system-prompt-parts` ask here at call time.

(local oml _G.oml)
(local fennel (require :fennel))
(local agent _G.agent)
(local tools _G.tools)
(local commands _G.commands)
(local session _G.session)
(local project _G.project)

(defsetting skills.claude? true :boolean
  "Whether the skills and markdown commands written for Claude Code in ~/.claude/skills and ~/.claude/commands are offered too (a project's .claude/ folders always are).")
(defsetting skills.disabled [] :table
  "Names of skills and markdown commands not to offer, e.g. [\"pdf\" \"deploy\"].")

(local skill _G.skill)
(set skill.defined (or skill.defined {}))
;; The skill.fnl files run in this process, by path.
(local loaded {})

(fn skill.def [name spec]
  "Define the Lisp skill NAME: SPEC is {:description :body}, :body the instructions the `skill`
tool gives the model (a string, or a function that returns one when the skill is loaded). It is
listed with the skills on disk and wins over one of the same name. Returns NAME."
  (when (or (not= :string (type name)) (not (name:find "^[%w_%-%.:]+$")))
    (error "skill.def: the name is a string of letters, digits, -, _, . and :" 2))
  (when (or (not= :table (type spec)) (not= :string (type spec.description)))
    (error "skill.def: expected (skill.def :name {:description \"…\" :body \"…\"})" 2))
  (tset skill.defined name {: name :description spec.description :body spec.body :source "skill.def"})
  (set generation (+ generation 1))
  name)

(fn disabled-set []
  "The names `skills.disabled` lists, as a set (read once per discovery, not once per name)."
  (collect [_ n (ipairs (or (oml.setting "skills.disabled") []))] n true))

(fn combine [disk off]
  (let [out {:found [] :shadowed [] :disabled [] :problems disk.problems}
        seen {}
        names (icollect [n (pairs skill.defined)] n)]
    (table.sort names)
    (fn add [s]
      (if (. seen s.name) (table.insert out.shadowed s)
          (. off s.name) (do (tset seen s.name true) (table.insert out.disabled s))
          (do (tset seen s.name true) (table.insert out.found s))))
    (each [_ n (ipairs names)] (add (. skill.defined n)))
    (each [_ s (ipairs disk.found)] (add s))
    (each [_ s (ipairs disk.shadowed)] (table.insert out.shadowed s))
    out))

;; What `skill.discover` made of each discovery (`project.skills` gives the same table while it
;; is fresh), with the `skill.def` generation and the disabled names it was made with: the
;; system prompt and the tool list ask before every model call.
(local combined (setmetatable {} {:__mode :k}))
(var generation 0)

(fn skill.discover [?dir]
  "The skills of the session (or of ?DIR): {:found :shadowed :disabled :problems}, the
`skill.def` ones first, then those `project.skills` finds; a name already found shadows the
next, and `skills.disabled` takes one out of :found. The same table while nothing changed:
treat it as read-only."
  (let [disk (project.skills (or ?dir (session.cwd)) (oml.setting "skills.claude?"))
        off (or (oml.setting "skills.disabled") [])
        key (.. generation "\0" (table.concat off "\0"))
        hit (. combined disk)]
    (if (and hit (= hit.key key))
        hit.out
        (let [out (combine disk (collect [_ n (ipairs off)] n true))]
          (tset combined disk {: key : out})
          out))))

(fn skill.find [name]
  "The skill called NAME that the model may load, or nil."
  (accumulate [hit nil _ s (ipairs (. (skill.discover) :found)) &until hit]
    (when (= s.name name) s)))

;; The listing made of each `skill.discover` result.
(local texts (setmetatable {} {:__mode :k}))

(fn agent.skills-text [?dir]
  "The skills block of the system prompt for ?DIR (default: the session's): each skill's name,
description and file, and how to use them; nil when there are none."
  (let [d (skill.discover ?dir)
        found d.found]
    (when (< 0 (length found))
      (or (. texts d)
          (let [text (.. "Skills: instructions for particular tasks, each in a folder. When a task matches a skill's description, load the skill with the skill tool before you start and follow it; the scripts and files it mentions are in its folder and run through bash like any command.\n"
                         (table.concat (icollect [_ s (ipairs found)]
                                         (.. "- " s.name ": " s.description (if s.file (.. " (" s.file ")") "")))
                                       "\n"))]
            (tset texts d text)
            text)))))

(fn skill.activate! [s]
  "Run the skill S's skill.fnl, once per process, when it has one and may (`project.load-skill-lisp`
says when); returns a line for the model when it did not run, else nil."
  (when (and s.lisp (not (. loaded s.lisp)))
    (let [(ok ran why) (pcall project.load-skill-lisp s.lisp)]
      (if (and ok ran) (do (tset loaded s.lisp true) nil)
          ok (.. "(Its skill.fnl was not run: " (tostring why) ".)")
          (.. "(Its skill.fnl failed: " (oml.error-message ran) ")")))))

(fn tools.skill [{: name}]
  {:fnl/docstring "Load a skill by name (the skills are listed in the system prompt): its instructions, and the folder its scripts and files are in."
   :kind :read :title "Skill {name}"
   :params {:name [:string "The skill's name, as listed"]}}
  (let [s (skill.find (or name ""))]
    (if (not s)
        {:content (.. "No skill " (tostring name) ". The skills: "
                      (table.concat (icollect [_ f (ipairs (. (skill.discover) :found))] f.name) ", "))
         :error? true}
        (let [body (if s.file (project.skill-body s.file)
                       (= :function (type s.body)) (s.body)
                       (or s.body ""))
              notice (skill.activate! s)
              folder (and s.file (s.file:match "^(.*)/[^/]*$"))]
          (.. body
              (if folder (.. "\n\n(The skill's folder is " folder "; relative paths above are in it.)") "")
              (if notice (.. "\n" notice) ""))))))

;; Offered only while there is a skill to load.
(fennel.metadata:set tools.skill :available? #(< 0 (length (. (skill.discover) :found))))

;;; Markdown commands

;; The entries made of each discovery (`project.prompt-commands` gives the same table while it
;; is fresh), so that a prompt's command lookup does not make a function per command again.
(local command-entries (setmetatable {} {:__mode :k}))

(fn agent.prompt-commands [?dir]
  "The markdown commands of the session (or of ?DIR) that no Lisp command shadows, as
`agent.commands` entries: {:name :fn :table \"markdown\" :file}, the function giving the prompt
for its input, with the file's description and argument hint as its docstring and :hint."
  (let [found (project.prompt-commands (or ?dir (session.cwd)) (oml.setting "skills.claude?"))
        entries (or (. command-entries found)
                    (let [made (icollect [_ c (ipairs found.found)]
                                 (let [f (fn [input] (project.command-prompt c.file (or input "")))]
                                   (fennel.metadata:set f :fnl/docstring
                                                        (or c.description (.. "Prompt from " c.file)))
                                   (when c.hint (fennel.metadata:set f :hint c.hint))
                                   {:name c.name :fn f :table :markdown :file c.file}))]
                      (tset command-entries found made)
                      made))]
    (let [off (disabled-set)]
      (icollect [_ e (ipairs entries)]
        (when (not (. off e.name)) e)))))

(oml.advise* "agent.commands" :markdown-commands
  (fn [commands-of]
    ;; The markdown commands come after the Lisp ones, and none shadows a Lisp command.
    (let [own (commands-of)
          taken (collect [_ e (ipairs own)] e.name true)
          (ok md) (pcall agent.prompt-commands)]
      (each [_ e (ipairs (if ok md []))]
        (when (not (. taken e.name)) (table.insert own e)))
      own)))

;;; /skills

(fn skill-line [s state]
  (.. "- `" s.name "` " (or s.file s.source "") (if state (.. " (" state ")") "")))

(fn commands.skills [input]
  {:fnl/docstring "List the skills: where each comes from, and which are shadowed, disabled or could not be read."}
  (let [d (skill.discover)
        lines []]
    (each [_ s (ipairs d.found)] (table.insert lines (skill-line s nil)))
    (each [_ s (ipairs d.disabled)] (table.insert lines (skill-line s "disabled: skills.disabled")))
    (each [_ s (ipairs d.shadowed)] (table.insert lines (skill-line s "shadowed by one of the same name")))
    (each [_ p (ipairs d.problems)]
      (table.insert lines (.. "- " p.file ":" p.line ": " p.message)))
    (if (= 0 (length lines))
        "No skills. Put a folder with a SKILL.md in .oml/skills (or .agents/skills, .claude/skills) of the project, or in the skills folder of oml's config folder."
        (table.concat lines "\n"))))
