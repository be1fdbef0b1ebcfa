"""The ETP wing: eligibility traces on the compiled ETP graph -- D-RTRL (:mod:`.d_rtrl`),
ES-D-RTRL and OSTL for feed-forward layers (:mod:`.es_d_rtrl`), e-prop and the three-factor
rule (:mod:`.eprop`), on one base (:mod:`.base`), executor (:mod:`.executor`), execution plan
(:mod:`.plan`), custom-VJP step (:mod:`.vjp_step`), trace algebra (:mod:`.trace_math`) and
learning status (:mod:`.status`)."""
