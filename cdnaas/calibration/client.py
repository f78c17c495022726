"""The RO's calibration calls as a typed client (``api-spec/ro.yaml``)."""
from cdnaas.common.http import JsonClient


class CalibrationClient(JsonClient):
    """Resource Orchestrator: calibration campaigns through the VIM driver."""

    service = "ro"

    def start(self, request):
        """Start a campaign; returns the job (202). 409 while one runs."""
        return self.post("/ro/v1/calibrations", json=request)

    def job(self, job_id):
        return self.get(f"/ro/v1/calibrations/{job_id}")

    def jobs(self):
        return self.get("/ro/v1/calibrations")["calibrations"]
