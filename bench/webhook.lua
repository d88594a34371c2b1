-- wrk script: POSTs webhook deliveries whose bodies all differ (the receiver stores a
-- repeated body once, so identical bodies would measure deduplication, not appends).
-- The first script argument (after `--`) is a run name, so that two runs against one
-- gateway do not repeat each other's bodies either.
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local run = "run"

function init(args)
  if args[1] ~= nil then run = args[1] end
end

local counter = 0

request = function()
  counter = counter + 1
  local body = string.format('{"event":"createReport","inspectionId":"bench-%s-%d-%d"}', run, id,
                             counter)
  return wrk.format("POST", nil, nil, body)
end
