# image.mk: a sandbox whose root is an image (IMAGE: an oci: reference the test made), read-only, and a step in it.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

.DELETE_ON_ERROR:
.PRECIOUS: %.sbx

box.sbx:
	$(sandbox-provision image=$(IMAGE) root=readonly lifetime=10m) > $@

step.log: box.sbx
	$(sandbox-run @box.sbx,cat /marker; touch /x 2>&1 || true) > $@

release: box.sbx
	$(sandbox-release @box.sbx)
