"""The commands users run (electra-pretrain, electra-finetune, ...): flags in, library calls out."""
