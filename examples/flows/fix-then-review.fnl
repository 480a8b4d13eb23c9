;; Fix, then review, with two agents: the first fixes what TASK describes, the second reviews
;; the change and the first answers the review. Each step is recorded in
;; fix-then-review.fnl.state.json, so a run that fails (an agent crashed, the network went away)
;; goes on from the step that failed when run again.
;;
;;   oml run examples/flows/fix-then-review.fnl FIXER REVIEWER "the failing test in src/parse.rs"
;;
;; FIXER and REVIEWER are agent names (`oml agents`, client.defagent). The fixer may edit files
;; (every permission allowed); the reviewer only reads. Both sessions are the ones `oml ask
;; FIXER` and `oml ask REVIEWER` reach from this directory, so you can look in on them.

(local [fixer reviewer task] [(. arg 1) (. arg 2) (. arg 3)])
(when (not (and fixer reviewer task))
  (print "usage: oml run fix-then-review.fnl FIXER REVIEWER TASK")
  (os.exit 2))

(fn ask [agent prompt opts]
  (let [r (client.ask agent prompt opts)]
    (print (.. "[" agent "] " r.stop-reason))
    r.text))

(local fix
  (flow.step :fix
    #(ask fixer (.. "Fix this: " task ". Say in a few lines what you changed and why.")
          {:policy :approve-all})))

(local review
  (flow.step :review
    #(ask reviewer (.. "Another agent made this change for \"" task "\":\n\n" fix
                       "\n\nReview the working tree's diff. List concrete problems, or answer just LGTM.")
          {:policy :approve-reads})))

(local answer
  (flow.step :answer-review
    #(if (review:match "^%s*LGTM")
         "nothing to do"
         (ask fixer (.. "A reviewer said:\n\n" review "\n\nAddress what is right; say what you did.")
              {:policy :approve-all}))))

(print (.. "\nfix:\n" fix "\n\nreview:\n" review "\n\nafter the review:\n" answer))
(flow.finish)
