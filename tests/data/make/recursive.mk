# recursive.mk: the top of a tree whose sub-make (recursive-sub.mk in sub/) inherits the run.
ifeq ($(SANDSTEP_PLUGIN),)
$(error SANDSTEP_PLUGIN is not set: the absolute path of sandstep.so)
endif
load $(SANDSTEP_PLUGIN)

all:
	@echo "top run=$(sandbox-run-id ) holder=$(sandbox-holder ) env-run=$$SANDSTEP_RUN env-top=$$SANDSTEP_TOP"
	+@$(MAKE) --no-print-directory -C sub
	@echo "after-sub stored=$$(cat .sandstep/run)"
