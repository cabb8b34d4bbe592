-- wrk script for `make bench-http` (bench/http_bench.sh): POST /v1/execute with {"code": CODE}
-- on keep-alive connections, counting responses by status code.
--
--   EXECBOX_BENCH_TOKEN=... [EXECBOX_BENCH_CODE='print(1)'] [EXECBOX_BENCH_EXPECT='1\n'] \
--     wrk -t2 -c8 -d20s --timeout 60s -s bench/http_load.lua http://127.0.0.1:PORT
--
-- Every wrk thread runs its own Lua state, so the counts live in per-thread globals; setup()
-- keeps each thread's handle, and done() (in the main state, after the threads stop) reads the
-- counts back with thread:get() and adds them up. done() prints one line that http_bench.sh
-- parses:
--
--   HTTP_LOAD requests=N duration_us=N p50_us=N p99_us=N ... s200=N s429=N other=N ...
--
-- s200 counts 200s whose Result is status "ok" with the expected stdout; bad200 counts the 200s
-- that are not (an internal_error, a killed run, wrong output); other counts every other status;
-- the 429s are split by the problem type of their body (queue-full, key-concurrency,
-- rate-limited).

local token = os.getenv("EXECBOX_BENCH_TOKEN") or ""
local code = os.getenv("EXECBOX_BENCH_CODE") or "print(1)"
local expect = os.getenv("EXECBOX_BENCH_EXPECT") or "1\n"

-- A JSON string literal (enough for code: quotes, backslashes, control characters).
local function json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    local named = { ['"'] = '\\"', ['\\'] = '\\\\', ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
    return named[c] or string.format("\\u%04x", c:byte())
  end) .. '"'
end

wrk.method = "POST"
wrk.path = "/v1/execute"
wrk.body = '{"code":' .. json_string(code) .. '}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. token

-- What a good answer contains, as it is serialized (compact JSON, no spaces).
local want_ok = '"status":"ok"'
local want_stdout = '"stdout":' .. json_string(expect)

-- Main state: one handle per thread.
local threads = {}

function setup(thread)
  thread:set("id", #threads + 1)
  table.insert(threads, thread)
end

-- Thread states: the counts. Tables with string keys only (thread:get copies them across).
function init(args)
  codes = {}     -- ["200"] = n, ["429"] = n, ["503"] = n, ...
  reasons = {}   -- ["queue-full"] = n, ... (429 bodies)
  bad200 = 0
  first_bad = ""
end

function response(status, headers, body)
  local key = tostring(status)
  codes[key] = (codes[key] or 0) + 1
  if status == 200 then
    if not (body and body:find(want_ok, 1, true) and body:find(want_stdout, 1, true)) then
      bad200 = bad200 + 1
      if first_bad == "" then first_bad = (body or ""):sub(1, 300) end
    end
  elseif status == 429 then
    local reason = body and (body:match('"type":"[^"]-([%w%-]+)"') or "?") or "?"
    reasons[reason] = (reasons[reason] or 0) + 1
  elseif first_bad == "" then
    first_bad = key .. " " .. (body or ""):sub(1, 300)
  end
end

function done(summary, latency, requests)
  local codes_all, reasons_all, bad, sample = {}, {}, 0, ""
  for _, thread in ipairs(threads) do
    for k, v in pairs(thread:get("codes") or {}) do codes_all[k] = (codes_all[k] or 0) + v end
    for k, v in pairs(thread:get("reasons") or {}) do reasons_all[k] = (reasons_all[k] or 0) + v end
    bad = bad + (thread:get("bad200") or 0)
    local fb = thread:get("first_bad") or ""
    if sample == "" then sample = fb end
  end
  local s200 = (codes_all["200"] or 0) - bad
  local s429 = codes_all["429"] or 0
  local other, other_list = 0, {}
  for k, v in pairs(codes_all) do
    if k ~= "200" and k ~= "429" then
      other = other + v
      table.insert(other_list, k .. ":" .. v)
    end
  end
  local reason_list = {}
  for k, v in pairs(reasons_all) do table.insert(reason_list, k .. ":" .. v) end
  table.sort(other_list)
  table.sort(reason_list)
  local e = summary.errors
  io.write(string.format(
    "HTTP_LOAD requests=%d duration_us=%d p50_us=%d p99_us=%d mean_us=%d max_us=%d " ..
    "s200=%d s429=%d bad200=%d other=%d connect=%d read=%d write=%d timeout=%d " ..
    "reasons=%s other_codes=%s\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    math.floor(latency.mean), latency.max, s200, s429, bad, other,
    e.connect, e.read, e.write, e.timeout,
    (#reason_list > 0 and table.concat(reason_list, ",") or "-"),
    (#other_list > 0 and table.concat(other_list, ",") or "-")))
  if sample ~= "" then
    io.write("HTTP_LOAD_FIRST_BAD " .. sample:gsub("\n", " ") .. "\n")
  end
end
