-- wrk script: POSTs webhook deliveries whose bodies all differ (the receiver stores a
-- repeated body once, so identical bodies would measure deduplication, not appends).
local threads = 0

function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end

local counter = 0

request = function()
  counter = counter + 1
  local body = string.format('{"event":"createReport","inspectionId":"bench-%d-%d"}', id, counter)
  return wrk.format("POST", nil, nil, body)
end
