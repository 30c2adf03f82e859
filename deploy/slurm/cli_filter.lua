--[[
preflight's submit-time fit check on submit hosts, for Slurm's cli_filter/lua plugin (docs/slurm.md: Before the
queue). sbatch, srun and salloc run this as the submitting user before they send the job; it starts no process.

A job that declares its workload in its comment,

    sbatch --gres=gpu:h200:1 --comment "preflight: workload=gelan-c batch=64 img=640" train.sh

(or #SBATCH --comment=...) is judged against the GPU type it asks for by preflight_submit.lua, from the table
`preflight slurm --submit-table` writes (preflight-fit.lua). Only a workload that does not fit refuses the job, and
only where the site's configuration says so; a job that declares nothing is left alone; a missing or stale table
lets the job go on with one warning line.

Install, in the folder of slurm.conf on every submit host: this file, preflight_submit.lua and preflight-fit.lua;
and in slurm.conf: CliFilterPlugins=lua. job_submit.lua does the same in slurmctld, for every path a job can take.
]]

local function folder()
	local source = debug and debug.getinfo and debug.getinfo(1, "S").source or ""
	local conf = os.getenv("SLURM_CONF")
	return string.match(source, "^@(.*/)[^/]*$") or (conf and string.match(conf, "^(.*/)[^/]*$")) or "/etc/slurm/"
end

local loaded, submit = pcall(dofile, folder() .. "preflight_submit.lua")

function slurm_cli_setup_defaults(options, early_pass)
	return slurm.SUCCESS
end

function slurm_cli_post_submit(offset, job_id, step_id)
	return slurm.SUCCESS
end

function slurm_cli_pre_submit(options, offset)
	if options["type"] == "srun" and os.getenv("SLURM_JOB_ID") ~= nil then
		return slurm.SUCCESS  -- a step of a job judged when it was submitted
	end
	local comment = options["comment"]
	if not loaded then
		if comment ~= nil and string.find(string.lower(comment), "preflight:", 1, true) then
			io.stderr:write("preflight: warning: the submit check cannot be loaded (" .. tostring(submit)
				.. "); the job goes on unchecked\n")
		end
		return slurm.SUCCESS
	end
	local decision, line = submit.check({comment = comment, gres = options["gres"], gpus = options["gpus"],
	                                     gpus_per_node = options["gpus-per-node"], nodes = options["nodes"]})
	if line ~= "" then
		io.stderr:write(line .. "\n")
	end
	if decision == submit.REFUSE then
		return slurm.ERROR
	end
	return slurm.SUCCESS
end
