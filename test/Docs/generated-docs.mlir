// The committed reference in docs/generated/ is what mlir-tblgen generates
// from the current .td files. If this fails, run `make docs` and commit.
// RUN: diff %ds_obj_root/docs/Dialects/DSDialect.md %ds_src_root/docs/generated/DSDialect.md
// RUN: diff %ds_obj_root/docs/Interfaces/DSInterfaces.md %ds_src_root/docs/generated/DSInterfaces.md
// RUN: diff %ds_obj_root/docs/DSPasses.md %ds_src_root/docs/generated/DSPasses.md
// RUN: diff %ds_obj_root/docs/DSConversionPasses.md %ds_src_root/docs/generated/DSConversionPasses.md
