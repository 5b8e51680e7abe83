#!/usr/bin/env bash
# The validation-side study of results/distill_plus/README.md (issue 75, part 1), seed 42, after
# `make reproduce-distill-hour SEED=42` (candidate 1, "hour"): candidate 2 ("shared"), the teacher
# scores of candidate 3 ("more"), every candidate on the uncapped validation side (per-question
# records for `rqa compare`), then candidate 3 with the shared-negatives setting the declared rule
# picked (SHARED=true|false, decided from the comparison of 1 and 2; unset: stop before it).
# No test pool is evaluated here. Every step resumes or is skipped when its output exists.
#   bash experiments/distill_plus_study.sh            # candidates 1 and 2, 3's teacher scores
#   SHARED=true bash experiments/distill_plus_study.sh  # then candidate 3
#   MORE6=1 bash experiments/distill_plus_study.sh  # candidate 4 alone (NOTES.md), against
#                                                    # candidate 3's committed validation record
set -euo pipefail
RQA=${RQA:-.venv/bin/rqa}
OUT=runs/distill_plus
HOUR=(experiment=distill_hour profile=cpu data.teacher.reranker=runs/reranker/listwise-hour seed=42)
MORE=(data.teacher.questions=14400 data.teacher.output=runs/distill/teacher-cpu-hour-q14400)
MORE6=(data.teacher.questions=28800 data.teacher.output=runs/distill/teacher-cpu-hour-q28800)
TIMED=(bash experiments/timed.sh $OUT/times-seed42.tsv)
mkdir -p $OUT/validation

validate() {  # NAME MODEL: the uncapped validation side, once
    test -f $OUT/validation/$1.json || $RQA evaluate --checkpoint "$2" --pool validation \
        --run-file $OUT/validation/$1.jsonl --quiet > $OUT/validation/$1.json
}

if [ -n "${MORE6:-}" ]; then  # candidate 4: candidate 3 on twice its questions (NOTES.md)
    "${TIMED[@]}" teacher-q28800 $RQA prepare "${HOUR[@]}" "${MORE6[@]}"
    "${TIMED[@]}" more6 $RQA train "${HOUR[@]}" "${MORE6[@]}" \
        model.distillation.shared_negatives=true output_dir=$OUT/more6 test_after_fit=false
    validate more6 $OUT/more6/distill_hour/cpu-seed42/model
    $RQA compare --output $OUT/validation/compare_more_more6.md \
        more=results/distill_plus/records/more_seed42.validation.questions.jsonl.gz \
        more6=$OUT/validation/more6.questions.jsonl.gz
    exit 0
fi
"${TIMED[@]}" shared $RQA train "${HOUR[@]}" model.distillation.shared_negatives=true \
    output_dir=$OUT/shared test_after_fit=false
"${TIMED[@]}" teacher-q14400 $RQA prepare "${HOUR[@]}" "${MORE[@]}"
validate hour runs/distill_hour/cpu-seed42/model
validate shared $OUT/shared/distill_hour/cpu-seed42/model
$RQA compare --output $OUT/validation/compare_hour_shared.md \
    hour=$OUT/validation/hour.questions.jsonl.gz shared=$OUT/validation/shared.questions.jsonl.gz
if [ -n "${SHARED:-}" ]; then
    "${TIMED[@]}" more $RQA train "${HOUR[@]}" "${MORE[@]}" \
        model.distillation.shared_negatives=$SHARED output_dir=$OUT/more test_after_fit=false
    validate more $OUT/more/distill_hour/cpu-seed42/model
fi
