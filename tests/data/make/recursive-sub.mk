# recursive-sub.mk: the sub-make of recursive.mk, run as sub/Makefile.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

inner:
	@echo "sub run=$(sandbox-run-id ) holder=$(sandbox-holder ) env-run=$$SANDSTEP_RUN env-top=$$SANDSTEP_TOP"
