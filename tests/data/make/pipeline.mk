# pipeline.mk: provision a sandbox, run a step in it that fails on its first
# attempt and passes on the next (a flag file persists in the sandbox's tree).
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

.DELETE_ON_ERROR:
.PRECIOUS: box.sbx

box.sbx:
	$(sandbox-provision lifetime=10m) > $@

step.log: box.sbx
	$(sandbox-run @box.sbx,test -f /workspace/flag || { touch /workspace/flag; echo first attempt fails >&2; exit 3; }; echo second attempt ok) > $@

other.log: box.sbx
	$(sandbox-run @box.sbx,echo other) > $@

commas.log: box.sbx
	$(sandbox-run @box.sbx,echo a,b,,c) > $@

id:
	@echo run=$(sandbox-run-id ) holder=$(sandbox-holder )

# Fails, so the run it started or continued stays stored for the next make.
fails:
	@echo run=$(sandbox-run-id ) holder=$(sandbox-holder ); exit 1

release: box.sbx
	$(sandbox-release @box.sbx)
