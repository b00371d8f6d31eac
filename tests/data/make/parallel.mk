# parallel.mk: four sandboxes provisioned at once under -j4.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

.DELETE_ON_ERROR:
.PRECIOUS: %.sbx
BOXES := a b c d

all: $(BOXES:%=%.sbx)

%.sbx:
	$(sandbox-provision lifetime=5m) > $@
