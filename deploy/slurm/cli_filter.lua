--[[
preflight's submit-time fit check, for Slurm's cli_filter/lua plugin (docs/slurm.md: Before the queue).

sbatch, srun and salloc run this on the submit host, as the submitting user, before they send the job. A job
that declares its workload in its comment,

    sbatch --gres=gpu:h200:1 --comment "preflight: workload=gelan-c batch=64 img=640" train.sh

(or #SBATCH --comment=... in the script) is judged by `preflight plan` against the GPU type it asks for. Only a
workload that does not fit that GPU stops the job, and only where the site's preflight configuration refuses such
jobs (slurm_does_not_fit = "warn" turns it into a warning). A job without a declaration is left alone, and a
preflight that is missing, slow or failing never stops a job: the user is told the job went on unchecked.

Install: this file as cli_filter.lua in the folder of slurm.conf on every submit host, and in slurm.conf:
    CliFilterPlugins=lua
preflight must be installed on the submit hosts (PREFLIGHT below: its name in PATH, or its full path).
]]

local PREFLIGHT = "preflight"  -- the command on the submit hosts
local DEADLINE = "0.5"  -- seconds preflight has to answer; PREFLIGHT_SUBMIT_DEADLINE overrides it for one user
local GPU_OPTIONS = {"gres", "gpus", "gpus-per-node", "nodes"}

local function quoted(text)
	return "'" .. string.gsub(text, "'", "'\\''") .. "'"
end

local function say(text)
	io.stderr:write(text .. "\n")
end

local function the_error(text)
	local last = ""
	for line in string.gmatch(text, "[^\n]+") do
		if string.find(line, "rror: ", 1, true) then
			return line  -- "preflight: error: ..." or click's "Error: ...", not the hint or usage below it
		end
		last = line
	end
	return last
end

function slurm_cli_setup_defaults(options, early_pass)
	return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
	return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
	local comment = options["comment"]
	if comment == nil or not string.find(string.lower(comment), "preflight:", 1, true) then
		return slurm.SUCCESS  -- nothing declared: untouched
	end
	if options["type"] == "srun" and os.getenv("SLURM_JOB_ID") ~= nil then
		return slurm.SUCCESS  -- a step of a job judged when it was submitted
	end
	local deadline = os.getenv("PREFLIGHT_SUBMIT_DEADLINE") or DEADLINE
	if not string.match(deadline, "^%d+%.?%d*$") then
		deadline = DEADLINE
	end
	local command = {"timeout", "-k", "1", deadline, PREFLIGHT, "plan", "--slurm-comment", quoted(comment)}
	for _, name in ipairs(GPU_OPTIONS) do
		local value = options[name]
		if value ~= nil and value ~= "" then
			table.insert(command, "--slurm-" .. name)
			table.insert(command, quoted(value))
		end
	end
	local pipe = io.popen(table.concat(command, " ") .. " 2>&1 </dev/null; echo \"preflight-exit:$?\"")
	if pipe == nil then
		say("preflight: warning: could not start preflight; the job goes on unchecked")
		return slurm.SUCCESS
	end
	local output = pipe:read("*a")
	pipe:close()
	local code = tonumber(string.match(output, "preflight%-exit:(%d+)%s*$"))
	local said = string.gsub(string.gsub(output, "preflight%-exit:%d+%s*$", ""), "%s+$", "")
	if code == 0 then
		if said ~= "" then
			say(said)
		end
		return slurm.SUCCESS
	elseif code == 1 then
		say(said)
		return slurm.ERROR
	elseif code == 126 or code == 127 then
		say("preflight: warning: " .. PREFLIGHT .. " is not installed on this host (or timeout is missing); the job "
			.. "goes on unchecked")
	elseif code == 124 or code == 137 then
		say("preflight: warning: preflight did not answer within " .. deadline .. " s; the job goes on unchecked")
	else
		say("preflight: warning: the job's workload was not judged (" .. the_error(said) .. "); the job goes on "
			.. "unchecked")
	end
	return slurm.SUCCESS
end
