;; `llm.chat` around the host functions of src/bind/llm.rs.
;;
;; Compiled to bytecode by build.rs. src/bind/llm.rs runs the chunk with the `llm` table and its
;; three host functions (start a call, wait for its next events, close it); it defines
;; `llm.chat`, which delivers the events to `:on-event` in the caller's coroutine, closes the
;; call when the callback fails, and raises failures as error tables.

(local (llm start next-events close) ...)

(local error-mt {:__name :llm-error
                 :__tostring (fn [e] (tostring e.message))})

(fn llm.chat [request ?opts]
  "Run one streaming model call with the current llm.* settings and return its outcome.
REQUEST is {:messages [...] :tools [...] :model \"optional override\"}: OpenAI chat messages, and
tools as {:name :description :parameters}. ?OPTS is {:on-event (fn [event] ...)}, called in this
coroutine with {:type :text-delta :text}, {:type :thought-delta :text}, {:type :tool-call :id
:name :arguments}, {:type :done :finish-reason :usage} and {:type :retry :attempt :delay
:reason}. Returns {:message :text :reasoning :tool-calls :finish-reason :usage :cancelled}. A
failure raises an error table {:kind :message :status :body :partial}; tostring gives the
message."
  (let [(call problem) (start request ?opts)]
    (when (not call)
      (error (.. "llm.chat: " problem) 2))
    (let [on-event (and ?opts (. ?opts :on-event))]
      (var outcome nil)
      (while (= nil outcome)
        (let [(kind value) (next-events call)]
          (case kind
            :events (when on-event
                      (for [i 1 (length value)]
                        (let [(ok err) (pcall on-event (. value i))]
                          (when (not ok)
                            (close call)
                            (error err 0)))))
            :ok (set outcome value)
            _ (do
                ;; The session remembers that its model failed, for the front end's report
                ;; (print mode's exit status 3).
                (when (and _G.session.current (_G.session.current))
                  (_G.session.put! :last-model-error value.kind))
                (error (setmetatable value error-mt) 0)))))
      outcome)))
