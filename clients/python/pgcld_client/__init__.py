"""pgcld_client: a Python client of pgcld (standard library only; numpy optional).

    from pgcld_client import Client, verify_inclusion
    client = Client("http://127.0.0.1:8080", api_key)
    answer = client.score(embeddings, model="toxicity", ids=["msg-1", "msg-2"])
    for result in answer.results:
        print(result["id"], result["decision"], result["probabilities"])

See clients/python/README.md."""

from .client import Client, ScoreResponse, __version__
from .errors import PgcldConnectionError, PgcldError, ProofError
from .proof import InclusionResult, verify_inclusion
from .tlog_proof import TlogResult, verify_tlog_proof

__all__ = ["Client", "ScoreResponse", "PgcldError", "PgcldConnectionError", "ProofError",
           "InclusionResult", "verify_inclusion", "TlogResult", "verify_tlog_proof", "__version__"]
