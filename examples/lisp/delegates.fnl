;; Recipes: hand parts of the work to other agents through `agent.delegate`.
;; Install: copy to ~/.config/oml/lisp/, define the agents or profiles it names
;; (client.defagent, agent.defdelegate), and add (require :delegates) to init.fnl.
;;
;;   /plan-review TASK   the planner (my.planner) plans TASK, the reviewer (my.reviewer) checks
;;                       the plan; both answers are shown.
;;   /ask-all QUESTION   every delegate (agent.delegate-names) is asked at once; their answers
;;                       are shown, then the model compares them.
;;
;; The sub-agents run in this session's directory, their permission questions come to you, and
;; they end with the session.

(oml.defsetting* "my.planner" "planner"
                 {:type :string :doc "The delegate that plans in /plan-review."})
(oml.defsetting* "my.reviewer" "reviewer"
                 {:type :string :doc "The delegate that reviews the plan in /plan-review."})

(fn commands.plan-review [task]
  {:fnl/docstring "Plan TASK with the delegate my.planner, then have my.reviewer check the plan."
   :hint "task"}
  (let [plan (agent.delegate my.planner task)
        review (agent.delegate my.reviewer (.. "Review this plan for: " task "\n\n" plan.text))]
    (.. "## Plan (" my.planner ")\n" plan.text "\n\n## Review (" my.reviewer ")\n" review.text)))

(fn commands.ask-all [question]
  {:fnl/docstring "Ask every delegate QUESTION at once, show their answers, and have the model compare them."
   :hint "question"}
  (let [sid (session.current)
        asked (icollect [_ name (ipairs (agent.delegate-names))]
                [name (client.spawn #(session.with sid agent.delegate name question))])
        answers (icollect [_ [name handle] (ipairs asked)]
                  (let [(ok r) (pcall client.join handle)]
                    (.. "## " name "\n" (if ok r.text (.. "(failed: " (tostring r) ")")))))
        all (table.concat answers "\n\n")]
    (session.say all "\n\n")
    (agent.complete (.. "Compare these answers to \"" question "\": where they agree, "
                        "where they differ, and which is right.\n\n" all))))
