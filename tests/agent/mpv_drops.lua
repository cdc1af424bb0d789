-- Prints mpv's own count of dropped and delayed frames when playback ends
-- (mpv_e2e_test.cc compares matrix-run's dropped frames with it).
local last = {}
local function poll()
  last.dropped = mp.get_property_number("frame-drop-count", last.dropped)
  last.decoder = mp.get_property_number("decoder-frame-drop-count", last.decoder)
  last.delayed = mp.get_property_number("vo-delayed-frame-count", last.delayed)
end
mp.add_periodic_timer(0.1, poll)
mp.register_event("end-file", function()
  poll()
  io.stderr:write(string.format("mpv-drops: %d %d %d\n", last.dropped or -1,
                                last.decoder or -1, last.delayed or -1))
end)
