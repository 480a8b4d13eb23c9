;; Token usage and what it costs: the session's running totals of model calls and tokens, and
;; their cost when `llm.prices` names the model's price. `oml acp` sends the cost in its
;; usage_update. Loaded after agent.fnl; agent.call-model calls `agent.add-usage!` by name.

(local oml _G.oml)
(local agent _G.agent)
(local session _G.session)

(defsetting llm.prices {} :table
  "Prices per million tokens by model id, e.g. {\"gpt-4o-mini\" {:input 0.15 :output 0.6}}, with :cache-read and :cache-write for input read from or written to a prompt cache (each the :input price when absent): a session's usage then has a :cost, which `oml acp` sends in its usage_update. A model not listed costs nothing known (no cost is sent).")
(defsetting llm.price-currency "USD" :string
  "The currency of `llm.prices` (an ISO 4217 code), as the usage_update's cost names it.")

(fn cache-counts [usage]
  "The input tokens of USAGE read from and written to a prompt cache: Anthropic's
cache_read_input_tokens and cache_creation_input_tokens, or OpenAI's
prompt_tokens_details.cached_tokens."
  (let [details (or (and (= :table (type usage.prompt_tokens_details)) usage.prompt_tokens_details) {})]
    (values (or (tonumber usage.cache_read_input_tokens) (tonumber details.cached_tokens) 0)
            (or (tonumber usage.cache_creation_input_tokens) 0))))

(fn agent.call-cost [model usage]
  "What one model call of MODEL with USAGE ({:prompt_tokens :completion_tokens}, and the cache
counts when the endpoint reports them) cost by `llm.prices`, or nil when the model has no
price. Input read from a cache costs :cache-read, input written to it :cache-write, the rest
:input."
  (let [price (. (or (oml.setting "llm.prices") {}) (or model ""))]
    (when (and (= :table (type price)) (= :table (type usage)))
      (let [input (or (tonumber price.input) 0)
            (read written) (cache-counts usage)
            fresh (math.max 0 (- (or (tonumber usage.prompt_tokens) 0) read written))]
        (/ (+ (* fresh input)
              (* read (or (tonumber price.cache-read) input))
              (* written (or (tonumber price.cache-write) input))
              (* (or (tonumber usage.completion_tokens) 0) (or (tonumber price.output) 0)))
           1000000)))))

(fn note-model! [model cost]
  "Record in the session's file the MODEL the usage that follows counts (and, with a COST, the
currency of `llm.price-currency`) when it changed since the last record: what the trajectory
export reads, `oml sessions export`."
  (let [currency (when cost (oml.setting "llm.price-currency"))
        key (.. (tostring model) "\n" (tostring currency))]
    (when (not= key (session.get :recorded-model-call))
      (session.put! :recorded-model-call key)
      (session.record! :model-call {:model (when (= :string (type model)) model) : currency}))))

(fn agent.add-usage! [usage model]
  "Add one model call of MODEL, with USAGE as the endpoint reported it, to the current session's
totals {:calls :prompt_tokens :completion_tokens :cost} (`session.get :usage`), with
:cache_read_tokens and :cache_write_tokens once a call reported any; :cost only once a call had a
price (`agent.call-cost`)."
  (when (session.current)
    (let [t (or (session.get :usage) {:calls 0 :prompt_tokens 0 :completion_tokens 0})
          cost (agent.call-cost model usage)]
      (note-model! model cost)
      (set t.calls (+ t.calls 1))
      (when (= :table (type usage))
        (set t.prompt_tokens (+ t.prompt_tokens (or (tonumber usage.prompt_tokens) 0)))
        (set t.completion_tokens (+ t.completion_tokens (or (tonumber usage.completion_tokens) 0)))
        (let [(read written) (cache-counts usage)]
          (when (or (> read 0) (> written 0) t.cache_read_tokens)
            (set t.cache_read_tokens (+ (or t.cache_read_tokens 0) read))
            (set t.cache_write_tokens (+ (or t.cache_write_tokens 0) written)))))
      (when cost (set t.cost (+ (or t.cost 0) cost)))
      (session.put! :usage t))))
