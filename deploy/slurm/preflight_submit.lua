--[[
preflight's submit-time fit check: the decision both Slurm filters share (docs/slurm.md: Before the queue).

cli_filter.lua (on submit hosts) and job_submit.lua (in slurmctld) load this file and the table that
`preflight slurm --submit-table` writes (preflight-fit.lua), both from the folder of slurm.conf, and decide a job
from them: no process is started. A job whose comment declares its workload,

    sbatch --gres=gpu:h200:1 --comment "preflight: workload=gelan-c batch=64 img=640" train.sh

is judged against the GPU type it asks for, as `preflight plan --slurm-comment` judges it (the same capacity model,
computed the same way: tests/test_submit_table.py holds the two equal). Only a certain "does not fit" refuses a job,
and only where the site's configuration says so (slurm_does_not_fit); a job that declares nothing is left alone;
a missing, unreadable or stale table lets the job go on with one warning line.

Lua 5.1 to 5.4 (Debian's Slurm links Lua 5.1): numbers are doubles, no integer division, no goto.
]]

local M = {}

M.VERSION = "0.1.0"  -- the preflight release this file comes with; a table written by another one is stale
M.TABLE = "preflight-fit.lua"
M.MARK = "preflight:"
M.SUBMIT, M.WARN, M.REFUSE, M.NOT_JUDGED, M.NONE = "submit", "warn", "refuse", "not judged", "none"

local KEYS = {workload = "string", task = "string", batch = "integer", img = "integer", fp32 = "flag",
              half = "flag", optimizer = "string", gpus = "integer", ["max-objects"] = "integer",
              ["instances-per-batch"] = "integer", labels = "string"}
local BY_HAND = {["max-objects"] = true, ["instances-per-batch"] = true, labels = true}
local TASKS = {train = true, inference = true}
local OPTIMIZERS = {SGD = true, Adam = true, AdamW = true}

-- --- the table -----------------------------------------------------------------------------------------------

function M.folder()
	local source = debug and debug.getinfo and debug.getinfo(1, "S").source or ""
	local here = string.match(source, "^@(.*/)[^/]*$")
	if here then
		return here
	end
	local conf = os.getenv("SLURM_CONF")
	return conf and string.match(conf, "^(.*/)[^/]*$") or "/etc/slurm/"
end

local function read_file(path)
	local handle = io.open(path, "rb")
	if handle == nil then
		return nil
	end
	local text = handle:read("*a")
	handle:close()
	return text
end

-- (the table, nil) or (nil, why it cannot be used): missing, unreadable, of another release, or written from
-- another site configuration than the one at its path now.
function M.load(folder)
	local path = (folder or M.folder()) .. M.TABLE
	local chunk, problem = loadfile(path)
	if chunk == nil then
		if read_file(path) == nil then
			return nil, "there is no submit table " .. path .. " (preflight slurm --submit-table " .. path
				.. " writes it)"
		end
		return nil, "the submit table " .. path .. " cannot be read (" .. tostring(problem)
			.. "): write it again with preflight slurm --submit-table " .. path
	end
	if setfenv then
		setfenv(chunk, {})  -- Lua 5.1: data, nothing from the global environment
	end
	local ok, fit = pcall(chunk)
	if not ok or type(fit) ~= "table" or fit.format ~= 1 then
		return nil, "the submit table " .. path .. " is not one this filter reads: write it again with preflight "
			.. "slurm --submit-table " .. path
	end
	if fit.preflight ~= M.VERSION then
		return nil, "the submit table " .. path .. " was written by preflight " .. tostring(fit.preflight)
			.. " and this filter is preflight " .. M.VERSION .. "'s: write it again with this release's "
			.. "preflight slurm --submit-table " .. path
	end
	local config = fit.config or {}
	if config.path and read_file(config.path) ~= config.text then
		return nil, "the site configuration " .. config.path .. " changed after the submit table " .. path
			.. " was written: write it again with preflight slurm --submit-table " .. path
	end
	fit.path = path
	return fit, nil
end

-- --- the declaration ---------------------------------------------------------------------------------------------

-- The words of text as a POSIX shell splits them (quotes and backslashes); nil and why for an open quote.
local function words_of(text)
	local words, current, quote, escaped, started = {}, {}, nil, false, false
	for i = 1, #text do
		local c = string.sub(text, i, i)
		if escaped then
			table.insert(current, c)
			escaped, started = false, true
		elseif quote == "'" then
			if c == "'" then quote = nil else table.insert(current, c) end
		elseif quote == '"' then
			if c == '"' then
				quote = nil
			elseif c == "\\" and string.match(string.sub(text, i + 1, i + 1), '[\\"$`]') then
				escaped = true
			else
				table.insert(current, c)
			end
		elseif c == "'" or c == '"' then
			quote, started = c, true
		elseif c == "\\" then
			escaped = true
		elseif string.match(c, "%s") then
			if started then
				table.insert(words, table.concat(current))
				current, started = {}, false
			end
		else
			table.insert(current, c)
			started = true
		end
	end
	if quote or escaped then
		return nil, "No closing quotation"
	end
	if started then
		table.insert(words, table.concat(current))
	end
	return words
end

-- The pairs declared after "preflight:" (a word of its own) up to a ";" or the end; nil when nothing is declared;
-- (false, why) for a declaration that cannot be read.
function M.declaration(comment)
	if comment == nil or comment == "" then
		return nil
	end
	local lower = string.lower(comment)
	local at
	local from = 1
	while true do
		local s, e = string.find(lower, M.MARK, from, true)
		if s == nil then
			return nil
		end
		if s == 1 or string.match(string.sub(lower, s - 1, s - 1), "%s") then
			at = e + 1
			break
		end
		from = e + 1
	end
	local text = string.match(string.sub(comment, at), "^([^;]*)")
	local words, problem = words_of(text)
	if words == nil then
		return false, "the job's comment: " .. problem .. " after '" .. M.MARK .. "'"
	end
	if #words == 0 then
		return false, "the job's comment says '" .. M.MARK .. "' and declares nothing after it"
	end
	local pairs_ = {}
	for _, word in ipairs(words) do
		local key, value = string.match(word, "^([^=]*)=(.*)$")
		if key == nil then
			key = word
		end
		key = string.gsub(string.gsub(string.gsub(key, "^%s+", ""), "%s+$", ""), "^%-+", "")
		key = string.gsub(key, "_", "-")
		if not string.match(key, "^[a-z][a-z0-9%-]*$") or value == "" then
			return false, "the job's comment: '" .. word .. "' is not KEY=VALUE"
		end
		table.insert(pairs_, {key, value})
	end
	return pairs_
end

-- --- the GPUs asked for --------------------------------------------------------------------------------------------

local function split(text, separator)
	local parts = {}
	for part in string.gmatch(text .. separator, "(.-)" .. separator) do
		table.insert(parts, part)
	end
	return parts
end

-- (type, count) of each GPU item of a --gres (gpu[:type][:count]) or --gpus ([type:]count) value; nil and why for
-- one Slurm would not take.
local function gpu_items(spec, gres_form, flag)
	local items = {}
	for _, item in ipairs(split(spec, ",")) do
		item = string.gsub(string.gsub(item, "^%s+", ""), "%s+$", "")
		item = string.gsub(string.gsub(item, "^[Gg][Rr][Ee][Ss]:", ""), "^[Gg][Rr][Ee][Ss]/", "")
		local parts = split(item, ":")
		local skip = false
		if gres_form then
			if string.lower(parts[1]) ~= "gpu" then
				skip = true
			else
				table.remove(parts, 1)
			end
		elseif #parts > 1 and string.lower(parts[1]) == "gpu" then
			table.remove(parts, 1)
		end
		if not skip then
			if #parts == 0 then
				table.insert(items, {"", 1})
			else
				local count = parts[#parts]
				if not string.match(count, "^%d+$") then
					if #parts == 1 and gres_form then
						table.insert(items, {string.lower(count), 1})
					else
						return nil, flag .. " '" .. spec .. "': the GPU count '" .. count .. "' is not a number"
					end
				elseif #parts > 2 then
					return nil, flag .. " '" .. spec .. "': '" .. item .. "' is not [type:]count"
				else
					table.insert(items, {#parts == 2 and string.lower(parts[1]) or "", tonumber(count)})
				end
			end
		end
	end
	return items
end

local function most_nodes(nodes)
	if nodes == nil or nodes == "" then
		return 1
	end
	local low, high = string.match(nodes, "^%s*(%d+)%s*%-%s*(%d+)%s*$")
	if low == nil then
		low = string.match(nodes, "^%s*(%d+)%s*$")
		high = "0"
	end
	if low == nil then
		return nil, "--slurm-nodes '" .. nodes .. "' is not N or MIN-MAX"
	end
	return math.max(tonumber(low), tonumber(high), 1)
end

-- {types, count, asked} of the job's GPUs (request: gres, gpus, gpus_per_node, nodes), false when it asks for
-- none, nil and why for a request that cannot be read.
function M.gpu_request(request)
	local per_node, in_all = {}, {}
	local checks = {{"gres", true, "--slurm-gres", per_node}, {"gpus_per_node", false, "--slurm-gpus-per-node", per_node},
	                {"gpus", false, "--slurm-gpus", in_all}}
	for _, check in ipairs(checks) do
		local value = request[check[1]]
		if value ~= nil and value ~= "" then
			local items, problem = gpu_items(value, check[2], check[3])
			if items == nil then
				return nil, problem
			end
			for _, item in ipairs(items) do
				table.insert(check[4], item)
			end
		end
	end
	local asked = {}
	for _, flag in ipairs({{"gres", "gres"}, {"gpus", "gpus"}, {"gpus_per_node", "gpus-per-node"}}) do
		local value = request[flag[1]]
		if value ~= nil and value ~= "" then
			local shown = string.gsub(string.gsub(value, "^[Gg][Rr][Ee][Ss][:/]", ""), ",[Gg][Rr][Ee][Ss][:/]", ",")
			table.insert(asked, "--" .. flag[2] .. "=" .. shown)
		end
	end
	local most, problem = most_nodes(request.nodes)
	if most == nil then
		return nil, problem
	end
	asked = table.concat(asked, " ")
	if request.nodes and request.nodes ~= "" and most > 1 then
		asked = asked .. " --nodes=" .. request.nodes
	end
	local items = #in_all > 0 and in_all or per_node
	local count, types, seen = 0, {}, {}
	for _, item in ipairs(items) do
		count = count + item[2]
		if not seen[item[1]] then
			seen[item[1]] = true
			table.insert(types, item[1])
		end
	end
	count = count * (#in_all > 0 and 1 or most)
	if #items == 0 or count == 0 then
		return false
	end
	table.sort(types)
	return {types = types, count = count, asked = asked,
	        slurm_type = (#types == 1 and types[1] ~= "") and types[1] or nil}
end

-- --- the capacity model, as preflight/capacity/estimate.py computes it -------------------------------------------

-- Python's round(): to the nearest whole number, halves to the even one.
local function round(x)
	local low = math.floor(x)
	local rest = x - low
	if rest > 0.5 or (rest == 0.5 and low % 2 == 1) then
		return low + 1
	end
	return low
end

-- Python's float floor division a // b for a, b > 0 (through fmod, as CPython computes it).
local function floor_div(a, b)
	local mod = math.fmod(a, b)
	local div = (a - mod) / b
	local floor = math.floor(div)
	if div - floor > 0.5 then
		floor = floor + 1
	end
	return floor
end

local function scale(setup, imgsz)
	return (imgsz / setup.reference) ^ 2
end

function M.required(setup, batch, imgsz)
	return round((setup.fixed + setup.whole * batch * scale(setup, imgsz)) * (1 + setup.margin))
end

function M.steps_need(setup, batch, imgsz)
	return round(setup.fixed + setup.steps * batch * scale(setup, imgsz))
end

local function largest(setup, available, imgsz, whole_run)
	local per_image = (whole_run and setup.whole or setup.steps) * scale(setup, imgsz)
	local room = (whole_run and available / (1 + setup.margin) or available) - setup.fixed
	if room < per_image then
		return 0
	end
	local need = whole_run and M.required or M.steps_need
	local batch = floor_div(room, per_image)
	while batch > 0 and need(setup, batch, imgsz) > available do
		batch = batch - 1
	end
	return batch
end

function M.max_batch(setup, available, imgsz)
	return largest(setup, available, imgsz, true)
end

function M.max_tight_batch(setup, available, imgsz)
	return largest(setup, available, imgsz, false)
end

local function format_bytes(value)
	local names = {"B", "KiB", "MiB", "GiB", "TiB"}
	local amount = value
	for index, name in ipairs(names) do
		if math.abs(amount) < 1024 or index == #names then
			if name == "B" then
				return string.format("%d %s", amount, name)
			end
			return string.format("%.1f %s", amount, name)
		end
		amount = amount / 1024
	end
end

-- --- the decision ------------------------------------------------------------------------------------------------

local function not_judged(why)
	return M.NOT_JUDGED, "preflight: not judged: " .. why
end

-- The catalog GPU a Slurm GPU type names (the largest of several), how many it may name; nil and why.
local function catalog_gpu(fit, slurm_type)
	local ids = fit.names[string.lower(slurm_type)]
	local best, count = nil, 0
	for _, id in ipairs(ids or {}) do
		local gpu = fit.gpus[id]
		if gpu then
			count = count + 1
			if best == nil or gpu.usable > fit.gpus[best].usable then
				best = id
			end
		end
	end
	if best then
		return best, count
	end
	local near, seen = {}, {}
	local wanted = string.lower(slurm_type)
	for word in string.gmatch(wanted, "%a*%d+") do
		if #word >= 2 then
			for name, list in pairs(fit.names) do
				if string.find(name, word, 1, true) then
					for _, id in ipairs(list) do
						if not seen[id] then
							seen[id] = true
							table.insert(near, id)
						end
					end
				end
			end
		end
	end
	table.sort(near)
	while #near > 8 do
		table.remove(near)
	end
	local maybe = #near > 0 and ("; it could be " .. table.concat(near, ", ")) or ""
	return nil, "the GPU type " .. slurm_type .. " is not one preflight knows" .. maybe
		.. ": the site names it with slurm_gpu_types = [\"" .. slurm_type .. "=ID\"] in its configuration"
end

-- The workload the declaration asks for: {id, task, precision, optimizer, batch, imgsz, gpus, setup}; nil and why.
local function workload(fit, declared)
	local values = {}
	for _, pair in ipairs(declared) do
		local key, value = pair[1], pair[2]
		local kind = KEYS[key]
		if kind == nil then
			local keys = {}
			for name in pairs(KEYS) do
				table.insert(keys, name)
			end
			table.sort(keys)
			return nil, "the job's comment declares '" .. key .. "': not a workload option; keys: "
				.. table.concat(keys, ", ")
		end
		if BY_HAND[key] then
			return nil, "the submit table holds the model for the usual objects per image; a declaration with "
				.. key .. " is judged by preflight plan --slurm-comment on a submit host"
		end
		if kind == "flag" then
			if value ~= nil and value ~= "true" and value ~= "yes" and value ~= "1" then
				return nil, "the job's comment: " .. key .. "=" .. value .. ": a flag: give " .. key .. " alone"
			end
			values[key] = true
		elseif value == nil then
			return nil, "the job's comment: " .. key .. ": give " .. key .. "=VALUE"
		elseif kind == "integer" then
			if not string.match(value, "^%+?%d+$") then
				return nil, "the job's comment: " .. key .. "=" .. value .. ": '" .. value
					.. "' is not a valid integer."
			end
			values[key] = tonumber(value)
		else
			values[key] = value
		end
	end
	if values.workload == nil then
		return nil, "the job's comment declares no workload (workload=ID)"
	end
	local task = values.task or "train"
	if not TASKS[task] then
		return nil, "the job's comment: task=" .. task .. ": not one of train, inference"
	end
	if values.optimizer ~= nil and not OPTIMIZERS[values.optimizer] then
		return nil, "the job's comment: optimizer=" .. values.optimizer .. ": not one of SGD, Adam, AdamW"
	end
	if values.fp32 and task ~= "train" then
		return nil, "--fp32 is for training (inference is FP32 unless --half)"
	end
	if values.half and task ~= "inference" then
		return nil, "--half is for inference (training uses AMP unless --fp32)"
	end
	local precision = values.fp32 and "fp32" or (values.half and "fp16" or fit.defaults.precision[task])
	local known = fit.workloads[values.workload]
	if known == nil then
		return nil, "unknown workload '" .. values.workload .. "'"
	end
	local batch = values.batch or fit.defaults.batch[task]
	if batch < 1 or batch > fit.limits.batch then
		return nil, "--batch must be from 1 to " .. fit.limits.batch .. ", got " .. batch
	end
	local imgsz = values.img or fit.defaults.imgsz
	if imgsz < fit.limits.stride or imgsz > fit.limits.imgsz then
		return nil, "--img must be from " .. fit.limits.stride .. " to " .. fit.limits.imgsz .. " pixels, got " .. imgsz
	end
	imgsz = math.ceil(imgsz / fit.limits.stride) * fit.limits.stride
	local optimizer = task == "train" and (values.optimizer or fit.defaults.optimizer) or nil
	local key = task .. " " .. precision .. (optimizer and (" " .. optimizer) or "")
	local setup = known.setups[key]
	if setup == nil then
		return nil, "workload '" .. values.workload .. "' has no estimate for " .. task .. " in " .. precision
	end
	if values.gpus ~= nil and (values.gpus < 1 or values.gpus > fit.limits.gpus) then
		return nil, "gpus must be from 1 to " .. fit.limits.gpus .. ", got " .. values.gpus
	end
	return {id = values.workload, task = task, precision = precision, optimizer = optimizer, batch = batch,
	        imgsz = imgsz, gpus = values.gpus, setup = setup}
end

-- The smallest catalog GPUs of the asked GPU's kind that hold `batch` images each, as "NAME (gpu:TYPE)".
local function alternatives(fit, run, batch, asked)
	local found = {}
	local need = M.required(run.setup, batch, run.imgsz)
	for _, id in ipairs(fit.gpu_order) do
		local gpu = fit.gpus[id]
		if id ~= asked and gpu.segment == fit.gpus[asked].segment and need <= gpu.usable then
			table.insert(found, gpu.name .. " (gpu:" .. gpu.slurm_type .. ")")
			if #found == 3 then
				break
			end
		end
	end
	return found
end

-- (decision, the line the user sees: "" when there is nothing to say). request: the job as Slurm gives it
-- (comment, gres, gpus, gpus_per_node, nodes); fit: the loaded table.
function M.decide(fit, request)
	local declared, problem = M.declaration(request.comment)
	if declared == nil then
		return M.NONE, ""
	end
	if declared == false then
		return not_judged(problem)
	end
	local gpus, why = M.gpu_request(request)
	if gpus == nil then
		return not_judged(why)
	end
	local run
	run, why = workload(fit, declared)
	if run == nil then
		return not_judged(why)
	end
	if gpus == false then
		return not_judged("the job declares " .. run.id .. " but asks for no GPU (--gres=gpu:TYPE:N or --gpus=TYPE:N)")
	end
	if gpus.slurm_type == nil then
		local names = (#gpus.types == 1 and gpus.types[1] == "") and "no GPU type" or "several GPU types"
		return not_judged(gpus.asked .. " names " .. names .. ": preflight judges one GPU type (--gres=gpu:TYPE:N)")
	end
	local id, named = catalog_gpu(fit, gpus.slurm_type)
	if id == nil then
		return not_judged(named)
	end
	local count = run.gpus or gpus.count
	if count > gpus.count then
		return not_judged("the job declares gpus=" .. count .. ", more than the " .. gpus.count .. " GPU"
			.. (gpus.count == 1 and "" or "s") .. " it asks for (" .. gpus.asked .. "): a run cannot use GPUs it "
			.. "was not given")
	end
	if run.batch % count ~= 0 then
		return M.WARN, "preflight: warning: batch " .. run.batch .. " does not divide by the " .. count
			.. " GPUs the job asks for (" .. gpus.asked .. "): YOLOv9's trainer refuses that under torchrun; "
			.. "declare the GPUs it uses with gpus=N"
	end
	local gpu = fit.gpus[id]
	local per_gpu = math.ceil(run.batch / count)
	local shown = run.id .. " (batch " .. run.batch .. ", img " .. run.imgsz
		.. (count > 1 and (", " .. per_gpu .. " per GPU") or "") .. ")"
	local on = count > 1 and (count .. " x " .. gpu.name) or gpu.name
	if named > 1 then
		on = on .. " (the largest GPU " .. gpus.slurm_type .. " may name)"
	end
	local required = M.required(run.setup, per_gpu, run.imgsz)
	local need = "needs " .. format_bytes(required) .. " per GPU, " .. format_bytes(gpu.usable) .. " usable"
	if required <= gpu.usable then
		return M.SUBMIT, "preflight: " .. shown .. " fits " .. on .. ": " .. need
	end
	local max_batch = M.max_batch(run.setup, gpu.usable, run.imgsz) * count
	local largest_text = max_batch > 0 and ("the largest batch that fits is " .. max_batch)
		or ("not even batch " .. count .. " fits")
	if M.steps_need(run.setup, per_gpu, run.imgsz) <= gpu.usable then
		return M.WARN, "preflight: warning: " .. shown .. " is tight on " .. on .. ": " .. need .. " with the "
			.. "validation pass; it should run with no headroom (" .. largest_text .. ")"
	end
	local fitting = alternatives(fit, run, per_gpu, id)
	local elsewhere = #fitting > 0 and ("; it would fit " .. table.concat(fitting, ", ")) or ""
	local words = shown .. " does not fit " .. on .. ": " .. need .. "; " .. largest_text .. elsewhere
	if fit.does_not_fit == "warn" then
		return M.WARN, "preflight: warning: " .. words
	end
	return M.REFUSE, "preflight: " .. words .. " (submission refused)"
end

-- The whole check, never an error: (decision, line). A job that declares nothing is never looked at further;
-- a table that cannot be used lets a declared job go on with one warning line.
function M.check(request, folder)
	if M.declaration(request.comment) == nil then
		return M.NONE, ""
	end
	local ok, decision, line = pcall(function()
		local fit, why = M.load(folder)
		if fit == nil then
			return M.NOT_JUDGED, "preflight: warning: " .. why .. "; the job goes on unchecked"
		end
		return M.decide(fit, request)
	end)
	if not ok then
		return M.NOT_JUDGED, "preflight: warning: the submit check failed (" .. tostring(decision)
			.. "); the job goes on unchecked"
	end
	return decision, line
end

return M
