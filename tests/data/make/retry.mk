# retry.mk: a step whose recipe fails after its first sandbox line wrote, on a
# sandbox provisioned with retry=RETRY (clean, or nothing).  Run again with
# PASS=1 it succeeds; count.out says how many attempts' lines the log holds.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

.DELETE_ON_ERROR:
.PRECIOUS: box.sbx
RETRY ?= clean
PASS ?= 0

box.sbx:
	$(sandbox-provision lifetime=10m $(if $(filter clean,$(RETRY)),retry=clean)) > $@

count.out: box.sbx input.txt
	$(sandbox-run @box.sbx,echo attempt >> log)
	$(sandbox-run @box.sbx,test $(PASS) = 1)
	$(sandbox-run @box.sbx,wc -l < log) > $@

release: box.sbx
	$(sandbox-release @box.sbx)
