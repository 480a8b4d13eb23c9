;; Recipe: replace the loop with plan -> execute -> review.
;; Install: copy to ~/.config/oml/lisp/ and add (require :plan-review) to init.fnl;
;; (unadvise! agent.run :plan-review) restores the plain loop.
;;
;; A tool-less agent.complete writes a plan, which is shown and appended together with "Carry out
;; the plan."; the plain agent.run carries it out; a review agent.complete answers DONE or lists
;; what is missing, which is appended as "Not done yet: ..." and run again, at most
;; my.max-reviews times.

(oml.defsetting* "my.max-reviews" 2
                 {:type :integer :doc "Review rounds of the plan-review recipe before it stops."})

(local plan-prompt
  "Before doing anything, write a short numbered plan for the request above. Do not carry it out yet.")
(local review-prompt
  "Review the work above against the request. If it is complete, answer exactly DONE. Otherwise list what is missing.")

(fn with-question [question]
  (let [msgs (icollect [_ m (ipairs (session.transcript))] m)]
    (table.insert msgs {:role :user :content question})
    msgs))

(advise! agent.run :plan-review
  (fn [run]
    (let [plan (agent.complete (with-question plan-prompt))]
      (session.say plan "\n\n")
      (session.append-message! [{:role :assistant :content plan}
                                {:role :user :content "Carry out the plan."}])
      (var stop (run))
      (var reviews 0)
      (var done false)
      (while (and (not done) (= stop :end-turn) (< reviews my.max-reviews))
        (set reviews (+ reviews 1))
        (let [verdict (agent.complete (with-question review-prompt))]
          (if (verdict:match "^%s*DONE")
              (set done true)
              (let [note (.. "Not done yet: " verdict)]
                (session.say "\n\n" note "\n\n")
                (session.append-message! {:role :user :content note})
                  (set stop (run))))))
      stop)))
