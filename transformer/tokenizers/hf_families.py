"""The Hugging Face families' tokenizers, as data: one TokenizerFamily record per family
(FAMILIES), read by the pipeline builder (hf_backend), the tokenizer (huggingface.HFTokenizer),
the pair maker (hf_pair) and tokenizer_config.json's reader (hf_files); and the language codes
each family's tokenizer knows, in its order (copied from transformers 5.23's tokenization modules:
the order decides the ids a tokenizer built from a SentencePiece model gives them, and M2M100's
ids are len(vocab.json) + the index here).

transformers' tokenizer classes for these families do not run the pipeline a tokenizer.json
describes: each takes only the vocabulary (and the BPE merges, and the normalization rules of a
``Precompiled`` normalizer) from tokenizer.json or from the SentencePiece model, and builds its own
normalizer, pre-tokenizer, model and decoder. A record says which, field by field:

============  =======  ============================================  ==================================
family        model    normalizer                                    pre-tokenizer / decoder
============  =======  ============================================  ==================================
``bart``      BPE      none                                          ByteLevel / ByteLevel
``mbart``     Unigram  none (the rules are not used)                 WhitespaceSplit + Metaspace
``mbart50``   Unigram  Precompiled (if any) + Replace(" {2,}", " ")  Metaspace / Metaspace
``t5``        Unigram  Precompiled (if any)                          WhitespaceSplit + Metaspace
``pegasus``   Unigram  Precompiled + Replace(" {2,}", " "), or       Metaspace / Metaspace
                       Replace("\\n", " ") + Replace(" {2,}", " ")
``nllb``      BPE      Precompiled + Replace(" {2,}", " "), or none  Metaspace / Metaspace
============  =======  ============================================  ==================================

A new family whose tokenizer is one of these pipelines with other data is one record here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["TokenizerFamily", "FAMILIES", "CLASS_FAMILY", "MBART_CODES", "MBART50_CODES",
           "NLLB_CODES", "M2M100_CODES"]

MBART_CODES = (
    'ar_AR', 'cs_CZ', 'de_DE', 'en_XX', 'es_XX', 'et_EE', 'fi_FI', 'fr_XX', 'gu_IN', 'hi_IN',
    'it_IT', 'ja_XX', 'kk_KZ', 'ko_KR', 'lt_LT', 'lv_LV', 'my_MM', 'ne_NP', 'nl_XX', 'ro_RO',
    'ru_RU', 'si_LK', 'tr_TR', 'vi_VN', 'zh_CN',
)

MBART50_CODES = (
    'ar_AR', 'cs_CZ', 'de_DE', 'en_XX', 'es_XX', 'et_EE', 'fi_FI', 'fr_XX', 'gu_IN', 'hi_IN',
    'it_IT', 'ja_XX', 'kk_KZ', 'ko_KR', 'lt_LT', 'lv_LV', 'my_MM', 'ne_NP', 'nl_XX', 'ro_RO',
    'ru_RU', 'si_LK', 'tr_TR', 'vi_VN', 'zh_CN', 'af_ZA', 'az_AZ', 'bn_IN', 'fa_IR', 'he_IL',
    'hr_HR', 'id_ID', 'ka_GE', 'km_KH', 'mk_MK', 'ml_IN', 'mn_MN', 'mr_IN', 'pl_PL', 'ps_AF',
    'pt_XX', 'sv_SE', 'sw_KE', 'ta_IN', 'te_IN', 'th_TH', 'tl_XX', 'uk_UA', 'ur_PK', 'xh_ZA',
    'gl_ES', 'sl_SI',
)

NLLB_CODES = (
    'ace_Arab', 'ace_Latn', 'acm_Arab', 'acq_Arab', 'aeb_Arab', 'afr_Latn', 'ajp_Arab', 'aka_Latn',
    'amh_Ethi', 'apc_Arab', 'arb_Arab', 'ars_Arab', 'ary_Arab', 'arz_Arab', 'asm_Beng', 'ast_Latn',
    'awa_Deva', 'ayr_Latn', 'azb_Arab', 'azj_Latn', 'bak_Cyrl', 'bam_Latn', 'ban_Latn', 'bel_Cyrl',
    'bem_Latn', 'ben_Beng', 'bho_Deva', 'bjn_Arab', 'bjn_Latn', 'bod_Tibt', 'bos_Latn', 'bug_Latn',
    'bul_Cyrl', 'cat_Latn', 'ceb_Latn', 'ces_Latn', 'cjk_Latn', 'ckb_Arab', 'crh_Latn', 'cym_Latn',
    'dan_Latn', 'deu_Latn', 'dik_Latn', 'dyu_Latn', 'dzo_Tibt', 'ell_Grek', 'eng_Latn', 'epo_Latn',
    'est_Latn', 'eus_Latn', 'ewe_Latn', 'fao_Latn', 'pes_Arab', 'fij_Latn', 'fin_Latn', 'fon_Latn',
    'fra_Latn', 'fur_Latn', 'fuv_Latn', 'gla_Latn', 'gle_Latn', 'glg_Latn', 'grn_Latn', 'guj_Gujr',
    'hat_Latn', 'hau_Latn', 'heb_Hebr', 'hin_Deva', 'hne_Deva', 'hrv_Latn', 'hun_Latn', 'hye_Armn',
    'ibo_Latn', 'ilo_Latn', 'ind_Latn', 'isl_Latn', 'ita_Latn', 'jav_Latn', 'jpn_Jpan', 'kab_Latn',
    'kac_Latn', 'kam_Latn', 'kan_Knda', 'kas_Arab', 'kas_Deva', 'kat_Geor', 'knc_Arab', 'knc_Latn',
    'kaz_Cyrl', 'kbp_Latn', 'kea_Latn', 'khm_Khmr', 'kik_Latn', 'kin_Latn', 'kir_Cyrl', 'kmb_Latn',
    'kon_Latn', 'kor_Hang', 'kmr_Latn', 'lao_Laoo', 'lvs_Latn', 'lij_Latn', 'lim_Latn', 'lin_Latn',
    'lit_Latn', 'lmo_Latn', 'ltg_Latn', 'ltz_Latn', 'lua_Latn', 'lug_Latn', 'luo_Latn', 'lus_Latn',
    'mag_Deva', 'mai_Deva', 'mal_Mlym', 'mar_Deva', 'min_Latn', 'mkd_Cyrl', 'plt_Latn', 'mlt_Latn',
    'mni_Beng', 'khk_Cyrl', 'mos_Latn', 'mri_Latn', 'zsm_Latn', 'mya_Mymr', 'nld_Latn', 'nno_Latn',
    'nob_Latn', 'npi_Deva', 'nso_Latn', 'nus_Latn', 'nya_Latn', 'oci_Latn', 'gaz_Latn', 'ory_Orya',
    'pag_Latn', 'pan_Guru', 'pap_Latn', 'pol_Latn', 'por_Latn', 'prs_Arab', 'pbt_Arab', 'quy_Latn',
    'ron_Latn', 'run_Latn', 'rus_Cyrl', 'sag_Latn', 'san_Deva', 'sat_Beng', 'scn_Latn', 'shn_Mymr',
    'sin_Sinh', 'slk_Latn', 'slv_Latn', 'smo_Latn', 'sna_Latn', 'snd_Arab', 'som_Latn', 'sot_Latn',
    'spa_Latn', 'als_Latn', 'srd_Latn', 'srp_Cyrl', 'ssw_Latn', 'sun_Latn', 'swe_Latn', 'swh_Latn',
    'szl_Latn', 'tam_Taml', 'tat_Cyrl', 'tel_Telu', 'tgk_Cyrl', 'tgl_Latn', 'tha_Thai', 'tir_Ethi',
    'taq_Latn', 'taq_Tfng', 'tpi_Latn', 'tsn_Latn', 'tso_Latn', 'tuk_Latn', 'tum_Latn', 'tur_Latn',
    'twi_Latn', 'tzm_Tfng', 'uig_Arab', 'ukr_Cyrl', 'umb_Latn', 'urd_Arab', 'uzn_Latn', 'vec_Latn',
    'vie_Latn', 'war_Latn', 'wol_Latn', 'xho_Latn', 'ydd_Hebr', 'yor_Latn', 'yue_Hant', 'zho_Hans',
    'zho_Hant', 'zul_Latn',
)

M2M100_CODES = {
    "m2m100": (
        'af', 'am', 'ar', 'ast', 'az', 'ba', 'be', 'bg', 'bn', 'br', 'bs', 'ca', 'ceb', 'cs', 'cy',
        'da', 'de', 'el', 'en', 'es', 'et', 'fa', 'ff', 'fi', 'fr', 'fy', 'ga', 'gd', 'gl', 'gu', 'ha',
        'he', 'hi', 'hr', 'ht', 'hu', 'hy', 'id', 'ig', 'ilo', 'is', 'it', 'ja', 'jv', 'ka', 'kk',
        'km', 'kn', 'ko', 'lb', 'lg', 'ln', 'lo', 'lt', 'lv', 'mg', 'mk', 'ml', 'mn', 'mr', 'ms', 'my',
        'ne', 'nl', 'no', 'ns', 'oc', 'or', 'pa', 'pl', 'ps', 'pt', 'ro', 'ru', 'sd', 'si', 'sk', 'sl',
        'so', 'sq', 'sr', 'ss', 'su', 'sv', 'sw', 'ta', 'th', 'tl', 'tn', 'tr', 'uk', 'ur', 'uz', 'vi',
        'wo', 'xh', 'yi', 'yo', 'zh', 'zu',
    ),
    "wmt21": ('en', 'ha', 'is', 'ja', 'cs', 'ru', 'zh', 'de'),
}


@dataclass(frozen=True, eq=False)  # one record per family: compared by identity
class TokenizerFamily:
    """One family's tokenizer, as transformers builds it (see the module's table)."""
    name: str  # the spec's "family"
    title: str  # in sentences: "mBART-50"
    classes: tuple[str, ...]  # tokenizer_config.json's tokenizer_class values that name it
    model_type: str  # "BPE" or "Unigram"
    specials: tuple[tuple[str, str], ...]  # role ("bos", "eos", "unk", "pad", ...) -> text
    files: tuple[str, ...] = ()  # what it is built from without a tokenizer.json
    language_codes: tuple[str, ...] = ()
    default_source_language: str | None = None
    # The ids around a text, by role ("bos", "eos", "lang": the side's language code):
    prefix: tuple[str, ...] = ()
    suffix: tuple[str, ...] = ("eos",)
    legacy_prefix: tuple[str, ...] | None = None  # with the legacy_behaviour option (NLLB's)
    legacy_suffix: tuple[str, ...] | None = None
    # The pipeline: normalizer steps ("precompiled": the rules, if the files give any;
    # "precompiled_or_newlines": the rules, else newlines to spaces; "collapse_spaces": runs of
    # spaces to one; "collapse_spaces_with_rules": that, only with rules); several steps are
    # one Sequence. pre_tokenizer: "byte_level", "metaspace" or "whitespace_metaspace".
    normalizer: tuple[str, ...] = ()
    pre_tokenizer: str = "metaspace"
    bpe_options: dict = field(default_factory=dict)  # the BPE model's (a BPE family's)
    unigram_unk: int | None = 3  # a Unigram model's unk id (None: the first '<unk>' of
    # score 0 after id 0, Pegasus's)
    # A vocabulary made of a SentencePiece model (None: not made so), as transformers' converter
    # lays it out: sentencepiece_head, then the model's pieces after the first
    # sentencepiece_skip, then the language codes and <mask> (codes_and_mask) or the extra ids
    # <extra_id_{n-1}> .. <extra_id_0> (extra_ids).
    sentencepiece_head: tuple[tuple[str, float], ...] | None = None
    sentencepiece_skip: int = 0
    sentencepiece_tail: str = ""
    sentencepiece_added_tokens: bool = True  # its control and user pieces are added tokens
    lay_out_codes: bool = False  # a tokenizer.json without the codes is laid out as above
    added_specials: tuple[str, ...] = ()  # special tokens added beyond specials and the codes
    adds_extra_ids: bool = False  # every <extra_id_N> of the vocabulary is made special
    mask_lstrip: bool = False  # <mask> as an added token: lstrip, normalized
    mask_normalized: bool = False


_FAIRSEQ = (("bos", "<s>"), ("eos", "</s>"), ("unk", "<unk>"), ("pad", "<pad>"),
            ("mask", "<mask>"))
_FAIRSEQ_HEAD = (("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0))
PEGASUS_OFFSET = 103  # Pegasus's reserved ids before the SentencePiece model's pieces
_RESERVED = tuple(f"<unk_{i}>" for i in range(2, PEGASUS_OFFSET))

FAMILIES = {family.name: family for family in (
    TokenizerFamily(
        "bart", "BART", ("BartTokenizer", "BartTokenizerFast", "RobertaTokenizer",
                         "RobertaTokenizerFast"), "BPE", _FAIRSEQ,
        files=("vocab.json", "merges.txt"), prefix=("bos",), pre_tokenizer="byte_level",
        bpe_options=dict(continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)),
    TokenizerFamily(
        "mbart", "mBART", ("MBartTokenizer", "MBartTokenizerFast"), "Unigram", _FAIRSEQ,
        files=("sentencepiece.bpe.model",), language_codes=MBART_CODES,
        default_source_language="en_XX", suffix=("eos", "lang"),
        pre_tokenizer="whitespace_metaspace", sentencepiece_head=_FAIRSEQ_HEAD,
        sentencepiece_skip=3, sentencepiece_tail="codes_and_mask", mask_lstrip=True),
    TokenizerFamily(
        "mbart50", "mBART-50", ("MBart50Tokenizer", "MBart50TokenizerFast"), "Unigram",
        _FAIRSEQ, files=("sentencepiece.bpe.model",), language_codes=MBART50_CODES,
        default_source_language="en_XX", prefix=("lang",),
        normalizer=("precompiled", "collapse_spaces"), sentencepiece_head=_FAIRSEQ_HEAD,
        sentencepiece_skip=3, sentencepiece_tail="codes_and_mask", lay_out_codes=True,
        mask_lstrip=True),
    TokenizerFamily(
        "t5", "T5", ("T5Tokenizer", "T5TokenizerFast", "MT5Tokenizer", "MT5TokenizerFast"),
        "Unigram", (("eos", "</s>"), ("unk", "<unk>"), ("pad", "<pad>")),
        files=("spiece.model",), normalizer=("precompiled",),
        pre_tokenizer="whitespace_metaspace", unigram_unk=2, sentencepiece_head=(),
        sentencepiece_tail="extra_ids", adds_extra_ids=True),
    TokenizerFamily(
        "pegasus", "Pegasus", ("PegasusTokenizer", "PegasusTokenizerFast"), "Unigram",
        (("pad", "<pad>"), ("eos", "</s>"), ("unk", "<unk>"), ("mask", "<mask_2>"),
         ("mask_sent", "<mask_1>")),
        files=("spiece.model",), normalizer=("precompiled_or_newlines", "collapse_spaces"),
        unigram_unk=None,
        sentencepiece_head=(("<pad>", 0.0), ("</s>", 0.0), ("<mask_1>", 0.0), ("<mask_2>", 0.0),
                            *((text, -100.0) for text in _RESERVED)),
        sentencepiece_skip=2, sentencepiece_added_tokens=False, added_specials=_RESERVED),
    TokenizerFamily(
        "nllb", "NLLB", ("NllbTokenizer", "NllbTokenizerFast"), "BPE", _FAIRSEQ,
        language_codes=NLLB_CODES, default_source_language="eng_Latn", prefix=("lang",),
        legacy_prefix=(), legacy_suffix=("eos", "lang"),
        normalizer=("precompiled", "collapse_spaces_with_rules"),
        bpe_options=dict(unk_token="<unk>", fuse_unk=True, byte_fallback=False),
        mask_lstrip=True, mask_normalized=True),
)}
# tokenizer_config.json's tokenizer_class -> the family (a record's name, or a tokenizer kind
# of its own: M2M100's, transformer.tokenizers.m2m100_pieces)
CLASS_FAMILY = {**{name: family.name for family in FAMILIES.values() for name in family.classes},
                "M2M100Tokenizer": "m2m100"}
