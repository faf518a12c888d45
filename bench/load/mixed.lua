-- wrk script: rotate GET requests over the read endpoints given in env LOAD_PATHS (space
-- separated), so one wrk run at N connections loads all of them at once, and count the answers
-- by status so any error is named, not just counted.
local paths = {}
for p in string.gmatch(os.getenv("LOAD_PATHS") or "/v1/health", "%S+") do
        paths[#paths + 1] = p
end
-- Built in init(), after wrk has set the Host header (a request built at load time has none).
local reqs = {}
function init(args)
        for i, p in ipairs(paths) do
                reqs[i] = wrk.format("GET", p)
        end
end

local threads = {}
function setup(thread)
        threads[#threads + 1] = thread
end

local n = 0
statuses = {}
request = function()
        n = n + 1
        return reqs[(n % #reqs) + 1]
end

response = function(status, headers, body)
        statuses[status] = (statuses[status] or 0) + 1
        if status >= 300 then
                last_error = status .. " " .. string.sub(body or "", 1, 200)
        end
end

function done(summary, latency, requests)
        local total = {}
        for _, t in ipairs(threads) do
                for code, count in pairs(t:get("statuses")) do
                        total[code] = (total[code] or 0) + count
                end
                local e = t:get("last_error")
                if e then
                        io.write("last error: " .. e .. "\n")
                end
        end
        local parts = {}
        for code, count in pairs(total) do
                parts[#parts + 1] = code .. "=" .. count
        end
        table.sort(parts)
        io.write("statuses: " .. table.concat(parts, " ") .. "\n")
end
