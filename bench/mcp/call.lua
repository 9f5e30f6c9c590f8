-- wrk's script for bench/mcp/run.sh: POSTs tools/call of MCP_TOOL with
-- MCP_ARGS (JSON) on the session MCP_SESSION (initialized beforehand),
-- with MCP_TOKEN as a bearer token when set; each request a new id (the
-- SDK's server routes answers by id). Checks every answer (HTTP 200, the
-- text MCP_EXPECT, no isError) and prints one line: calls/s of the good
-- ones, p50 and p99 latency, counts. Run with one wrk thread (-t1).
local tool = os.getenv("MCP_TOOL")
local expect = os.getenv("MCP_EXPECT") or ""
local token = os.getenv("MCP_TOKEN") or ""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"
wrk.headers["Mcp-Session-Id"] = os.getenv("MCP_SESSION")
wrk.headers["MCP-Protocol-Version"] = "2025-06-18"
if token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end
local head = '{"jsonrpc":"2.0","id":'
local tail = ',"method":"tools/call","params":{"name":"' .. tool .. '","arguments":'
  .. (os.getenv("MCP_ARGS") or "{}") .. '}}'

local threads = {}
function setup(thread) table.insert(threads, thread) end

function init(args)
  ok, failed, n = 0, 0, 0
end

function request()
  n = n + 1
  return wrk.format(nil, nil, nil, head .. n .. tail)
end

function response(status, headers, body)
  if status == 200 and body:find(expect, 1, true) and not body:find('"isError":true', 1, true) then
    ok = ok + 1
  else
    failed = failed + 1
    if failed == 1 then io.stderr:write("bench/mcp: a failed call: HTTP " .. status .. " " .. body:sub(1, 300) .. "\n") end
  end
end

function done(summary, latency, requests)
  local good, bad = 0, 0
  for _, t in ipairs(threads) do
    good = good + t:get("ok")
    bad = bad + t:get("failed")
  end
  io.write(string.format("%.0f calls/s, p50 %.2f ms, p99 %.2f ms, %d ok, %d failed\n",
    good / (summary.duration / 1e6), latency:percentile(50) / 1000,
    latency:percentile(99) / 1000, good, bad))
end
