# interrupt.mk: ^C while box.sbx's recipe runs, after the handle is written.
# PRECIOUS names the form under test: `box.sbx` keeps the handle in GNU make
# 4.3, `%.sbx` does not (it covers only files of a pattern rule).
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

.DELETE_ON_ERROR:
PRECIOUS ?= box.sbx
.PRECIOUS: $(PRECIOUS)

box.sbx:
	$(sandbox-provision lifetime=10m) > $@
	touch provisioned; sleep 30
