;; The plan: a short task list the model keeps while it works (Codex's `update_plan`, Claude
;; Code's todo list), shown to the user as it changes. Each call of the `update_plan` tool
;; replaces the whole list (its `steps`, each a {step, status} or a plain string, which is a
;; pending step); the loop reports it as a plan event, which `oml acp` sends as an ACP
;; `plan` update, the chat draws as a checklist and print mode lists. Loaded after agent.fnl.

(local agent _G.agent)
(local tools _G.tools)
(local session _G.session)
(local json _G.json)

;; The statuses a step may have, in the order a step goes through them.
(local status-list [:pending :in_progress :completed])
(local statuses (collect [_ s (ipairs status-list)] s true))

;; Longest plan kept: a model that writes hundreds of steps gets told.
(local max-steps 50)

(fn agent.plan [?session-id]
  "The session's current plan: a list of {:step :status}, status :pending, :in_progress or
:completed; empty when the model has not made one."
  (or (session.get :plan ?session-id) []))

(fn agent.plan-entries [plan]
  "PLAN (a list of {:step :status}) as ACP PlanEntry objects {:content :priority :status}."
  (icollect [_ s (ipairs plan)]
    {:content s.step :priority :medium :status s.status}))

(fn as-step [s]
  ;; A step the model sent as a plain string is a pending step of that text.
  (if (= :string (type s)) {:step s :status :pending} s))

(fn check-plan [plan]
  (if (not= :table (type plan)) "steps must be a list of {step, status}"
      (> (length plan) max-steps) (.. "a plan has at most " max-steps " steps")
      (accumulate [err nil i s (ipairs plan) &until err]
        (if (or (not= :table (type s)) (not= :string (type s.step)) (not (s.step:find "%S")))
            (.. "step " i " needs a step text")
            (not (. statuses s.status))
            (.. "step " i ": status must be pending, in_progress or completed")))))

(fn tools.update_plan [{: steps : explanation &as args}]
  {:fnl/docstring "Keep a short plan of the task and show it to the user: give the whole list each time, each step with a status (pending, in_progress, completed), at most one in_progress. Use it for work of several steps; skip it for quick questions."
   :kind :think :title "Update plan"
   ;; A step's schema, as Codex's `update_plan` has it (metadata holds literals only, so the
   ;; enum repeats `status-list`).
   :params {:steps [:array "The steps, in order: each {step, status}"
                    {:items {:type :object
                             :properties {:step {:type :string :description "What to do, in a few words"}
                                          :status {:type :string
                                                   :enum [:pending :in_progress :completed]}}
                             :required [:step :status]}}]
            :explanation [:string "Why the plan changed, in a sentence" :optional]}}
  ;; `plan` is what the argument was called before `steps` (older sessions and models send it);
  ;; editors show an argument named `plan` as a proposed plan, so the schema names it `steps`.
  (let [given (or steps args.plan)
        plan (if (= :table (type given)) (icollect [_ s (ipairs given)] (as-step s)) given)
        err (check-plan plan)]
    (if err
        {:content err :error? true}
        (let [steps (icollect [_ s (ipairs plan)] {:step s.step :status s.status})]
          (session.put! :plan steps)
          (session.emit! {:type :plan :entries (agent.plan-entries steps)})
          (let [done (accumulate [n 0 _ s (ipairs steps)] (if (= s.status :completed) (+ n 1) n))]
            (.. "Plan updated: " done " of " (length steps) " steps completed"
                (if (= :string (type explanation)) (.. ". " explanation) "")))))))
