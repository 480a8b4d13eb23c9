;; Recipe: a permission policy in Lisp. Ask before write, edit and bash; remember "always" per
;; tool for the session; a rejection blocks the call and the model reads why.
;; Install: copy to ~/.config/oml/lisp/ and add (require :permissions) to init.fnl.
;; It asks through agent.ask-permission, which a frontend that can ask (ACP, the REPL) defines;
;; in print mode (oml -p) nobody can be asked, and the recipe counts that as a rejection.

(oml.defsetting* "my.ask-tools" [:write :edit :bash]
                 {:type :table :doc "Tools the permissions recipe asks about before they run."})

(fn asks? [name]
  (accumulate [hit false _ n (ipairs my.ask-tools) &until hit] (= n name)))

(fn decide [call]
  "nil when CALL may run, else why it is blocked."
  (let [key (.. "my.permission." call.name)
        remembered (session.get key)]
    (if (not (asks? call.name)) nil
        (= remembered :allow) nil
        (= remembered :reject) (.. "the user always rejects " call.name)
        (case (agent.ask-permission call)
          :allow-once nil
          :allow-always (do (session.put! key :allow) nil)
          :reject-always (do (session.put! key :reject) "the user rejected it")
          :reject-once "the user rejected it"
          :cancelled "the prompt was cancelled before the user answered"
          :cannot-ask (.. "nobody can be asked whether " call.name
                          " may run here (print mode), so it counts as rejected")
          other (.. "the permission answer " (tostring other) " is not understood, so it counts as rejected")))))

(advise! agent.execute-tool :permissions
  (fn [execute call]
    (let [reason (decide call)]
      (if reason
          {:content (.. "Blocked: " reason) :error? true}
          (execute call)))))

{: decide}
