-- wrk script for bench/http.sh: POST /v1/payments with a new Idempotency-Key on every request
-- (a Structured Field string, as the IETF draft sends it), so that every request is a new
-- payment on both the exactly-once and the plain handler.
local threads = 0
function setup(thread)
    threads = threads + 1
    thread:set("tid", threads)
end

local n = 0
local prefix
function init(args)
    prefix = string.format("b%d-%d-%d", os.time(), math.random(1000000), tid)
end

local body = '{"customer": "c_1", "amount": 1000, "currency": "eur"}'
function request()
    n = n + 1
    return wrk.format("POST", wrk.path, {
        ["Content-Type"] = "application/json",
        ["Idempotency-Key"] = '"' .. prefix .. "-" .. n .. '"',
    }, body)
end
