--[[
preflight's submit-time fit check in slurmctld, for Slurm's job_submit/lua plugin (docs/slurm.md: Before the
queue): every job, whichever way it comes (sbatch, srun, salloc, slurmrestd, a submit host without the client
filter), before it queues. It starts no process.

A job whose comment declares its workload ("preflight: workload=gelan-c batch=64 img=640") is judged against the
GPU type it asks for by preflight_submit.lua, from the table `preflight slurm --submit-table` writes
(preflight-fit.lua); only a workload that does not fit refuses it, and only where the site's configuration says
so. A job that declares nothing is left alone; a missing or stale table lets the job go on (its submitter is told).

Install, in the folder of slurmctld's slurm.conf: this file, preflight_submit.lua and preflight-fit.lua; and in
slurm.conf: JobSubmitPlugins=lua.
]]

local NO_VAL = 4294967294  -- Slurm's "not set" for a 32-bit field (min_nodes, max_nodes)

local function folder()
	local source = debug and debug.getinfo and debug.getinfo(1, "S").source or ""
	local conf = os.getenv("SLURM_CONF")
	return string.match(source, "^@(.*/)[^/]*$") or (conf and string.match(conf, "^(.*/)[^/]*$")) or "/etc/slurm/"
end

local loaded, submit = pcall(dofile, folder() .. "preflight_submit.lua")

local function nodes(job_desc)
	local low, high = tonumber(job_desc.min_nodes), tonumber(job_desc.max_nodes)
	low = (low ~= nil and low < NO_VAL) and low or nil
	high = (high ~= nil and high < NO_VAL) and high or nil
	if low and high and high > low then
		return string.format("%d-%d", low, high)
	end
	return low and string.format("%d", low) or nil
end

function slurm_job_submit(job_desc, part_list, submit_uid)
	local comment = job_desc.comment
	if not loaded then
		if comment ~= nil and string.find(string.lower(comment), "preflight:", 1, true) then
			slurm.log_info("preflight: the submit check cannot be loaded (%s)", tostring(submit))
			slurm.log_user("preflight: warning: the submit check cannot be loaded; the job goes on unchecked")
		end
		return slurm.SUCCESS
	end
	local decision, line = submit.check({comment = comment, gres = job_desc.tres_per_node,
	                                     gpus = job_desc.tres_per_job, nodes = nodes(job_desc)})
	if line ~= "" then
		slurm.log_user("%s", line)
	end
	if decision == submit.REFUSE then
		slurm.log_info("preflight: refused a job of uid %s: %s", tostring(submit_uid), line)
		return slurm.ERROR
	end
	return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
	return slurm.SUCCESS
end
